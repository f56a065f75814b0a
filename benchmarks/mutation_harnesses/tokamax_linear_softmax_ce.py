# harness for: tokamax:tokamax/_src/ops/linear_softmax_cross_entropy_loss/pallas_mosaic_tpu_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# file's forward and backward kernels (sum reduction, 2x2x2 blocks), against a reference written here.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_lsce"
TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}
_BLOCKS = dict(b_block_size=128, h_block_size=128, v_block_size=256)


def harness_lsce(x, labels, w):
    loss, lse = linear_softmax_cross_entropy_loss_fwd_pallas_mosaic_tpu(x, labels, w, **_BLOCKS)
    dx, dw = linear_softmax_cross_entropy_loss_bwd_pallas_mosaic_tpu(jnp.ones((), jnp.float32), lse, x, labels, w,
                                                                      **_BLOCKS)
    return loss, lse, dx, dw


def example_inputs():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(k1, (256, 256), jnp.float32) * 0.1
    w = jax.random.normal(k2, (256, 512), jnp.float32) * 0.1
    labels = jax.random.randint(k3, (256,), 0, 512, jnp.int32)
    return x, labels, w


def reference(x, labels, w):
    def loss_of(x, w):
        logits = jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST)
        lse = jax.nn.logsumexp(logits, axis=-1)
        return jnp.sum(lse - jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]), lse

    (loss, lse), (dx, dw) = jax.value_and_grad(loss_of, argnums=(0, 1), has_aux=True)(x, w)
    return loss, lse, dx, dw

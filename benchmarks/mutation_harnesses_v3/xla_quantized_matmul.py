# harness for: pytorch-xla:torch_xla/experimental/pallas_kernels/quantized_matmul_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: quantized_matmul_int8 with
# quantize_activation=True (as test/test_quantized_matmul_pallas_kernel.py calls it) on a (200, 320) f32 x and a
# per-row int8-quantised (272, 320) w, twice: blocks (128, 128, 128) (grid 2 x 3 x 3, the int32 accumulator path,
# padded on every axis) and (128, 128, 384) (grid 2 x 3 x 1, the cached quantised-x path). The reference is the
# dense matmul of the per-row int8-quantised x (scale max|x|/127, round) with w, rescaled by both scales.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_quantized_matmul"
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

_BS, _IN, _OUT = 200, 320, 272


def harness_quantized_matmul(x, w, scalar):
    acc_path = quantized_matmul_int8(x, w, scalar, quantize_activation=True, batch_block_size=128,
                                     out_block_size=128, in_block_size=128)
    cached_xq_path = quantized_matmul_int8(x, w, scalar, quantize_activation=True, batch_block_size=128,
                                           out_block_size=128, in_block_size=384)
    return acc_path, cached_xq_path


def example_inputs():
    kx, kw = jax.random.split(jax.random.key(1234))
    x = jax.random.normal(kx, (_BS, _IN), jnp.float32)
    w = jax.random.normal(kw, (_OUT, _IN), jnp.float32) * (1.0 + jnp.arange(_OUT, dtype=jnp.float32)[:, None] / _OUT)
    w_scale = jnp.max(jnp.abs(w), axis=-1) / 127.0
    w_q = jnp.clip(jnp.round(w / w_scale[:, None]), -128, 127).astype(jnp.int8)
    return (x, w_q, w_scale.astype(jnp.float32))


def reference(x, w, scalar):
    x_scale = jnp.max(jnp.abs(x), axis=-1) / 127.0  # [bs]
    x_q = jnp.round(x / x_scale[:, None]).astype(jnp.int32)
    acc = jnp.dot(x_q, w.astype(jnp.int32).T)  # exact int32 product
    out = (acc.astype(jnp.float32) * scalar[None, :].astype(jnp.float32)) * x_scale[:, None]
    out = out.astype(x.dtype)
    return out, out

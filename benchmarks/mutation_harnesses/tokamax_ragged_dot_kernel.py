# harness for: tokamax:tokamax/_src/ops/ragged_dot/pallas_mosaic_tpu_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# file's `gmm` and `tgmm` on four groups (float32, tiling 128), against references written here.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_ragged_dot"
_GROUPS = (128, 256, 64, 64)
_PRECISION = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}


def harness_ragged_dot(lhs, rhs, grad, group_sizes):
    out = gmm(lhs, rhs, group_sizes, _PRECISION, jnp.float32, tiling=(128, 128, 128))
    drhs = tgmm(lhs.T, grad, group_sizes, _PRECISION, jnp.float32, tiling=(128, 128, 128))
    return out, drhs


def example_inputs():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    lhs = jax.random.normal(k1, (512, 256), jnp.float32)
    rhs = jax.random.normal(k2, (len(_GROUPS), 256, 384), jnp.float32)
    grad = jax.random.normal(k3, (512, 384), jnp.float32)
    return lhs, rhs, grad, jnp.array(_GROUPS, jnp.int32)


def reference(lhs, rhs, grad, group_sizes):
    out = jax.lax.ragged_dot(lhs, rhs, group_sizes, precision=jax.lax.Precision.HIGHEST)
    ends = jnp.cumsum(group_sizes)
    rows = jnp.arange(lhs.shape[0])
    member = (rows[None, :] < ends[:, None]) & (rows[None, :] >= (ends - group_sizes)[:, None])  # [g, m]
    drhs = jnp.einsum("gm,mk,mn->gkn", member.astype(lhs.dtype), lhs, grad, precision=jax.lax.Precision.HIGHEST)
    return out, drhs

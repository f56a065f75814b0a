# harness for: tokamax:tokamax/_src/ops/ragged_dot/pallas_mosaic_tpu_v2_tgmm_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# file's `tgmm_v2` (per group: lhs rows of the group, transposed, times rhs rows of the group) on four groups.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_tgmm_v2"
_GROUPS = (128, 256, 64, 64)
TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


def harness_tgmm_v2(lhs, rhs, group_sizes):
    return tgmm_v2(lhs, rhs, group_sizes, len(_GROUPS), preferred_element_type=jnp.float32)


def example_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    lhs = jax.random.normal(k1, (512, 256), jnp.float32)
    rhs = jax.random.normal(k2, (512, 384), jnp.float32)
    return lhs, rhs, jnp.array(_GROUPS, jnp.int32)


def reference(lhs, rhs, group_sizes):
    ends = jnp.cumsum(group_sizes)
    rows = jnp.arange(lhs.shape[0])
    member = (rows[None, :] < ends[:, None]) & (rows[None, :] >= (ends - group_sizes)[:, None])  # [groups, m]
    return jnp.einsum("gm,mk,mn->gkn", member.astype(lhs.dtype), lhs, rhs, precision=jax.lax.Precision.HIGHEST)

# harness for: sglang-jax:python/sgl_jax/srt/kernels/gmm/megablox_gmm_kernel/gmm_v2.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v2 (issue 57's corpus): four groups
# of uneven sizes over a (512, 256) lhs with the file's own tiling function; the reference is jax's ragged_dot.
import jax
import jax.numpy as jnp

_GROUPS = (128, 256, 64, 64)
PALLASITE_ENTRY = "harness_gmm_v2"
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}


def harness_gmm_v2(lhs, rhs, group_sizes):
    return gmm_v2(lhs, rhs, group_sizes, preferred_element_type=jnp.float32)


def example_inputs():
    lhs = jax.random.normal(jax.random.key(0), (512, 256), jnp.float32)
    rhs = jax.random.normal(jax.random.key(1), (len(_GROUPS), 256, 384), jnp.float32)
    return (lhs, rhs, jnp.array(_GROUPS, jnp.int32))


def reference(lhs, rhs, group_sizes):
    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32)

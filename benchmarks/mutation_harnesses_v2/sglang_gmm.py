# harness for: sglang-jax:python/sgl_jax/srt/kernels/gmm/megablox_gmm_kernel/gmm.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v2 (issue 57's corpus): four groups
# of uneven sizes over a (512, 256) lhs, (128, 128, 128) tiles; the reference is jax's ragged_dot.
import jax
import jax.numpy as jnp

_GROUPS = (128, 256, 64, 64)
PALLASITE_ENTRY = "harness_gmm"
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}


def harness_gmm(lhs, rhs, group_sizes):
    return gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.float32, tiling=(128, 128, 128))


def example_inputs():
    lhs = jax.random.normal(jax.random.key(0), (512, 256), jnp.float32)
    rhs = jax.random.normal(jax.random.key(1), (len(_GROUPS), 256, 384), jnp.float32)
    return (lhs, rhs, jnp.array(_GROUPS, jnp.int32))


def reference(lhs, rhs, group_sizes):
    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32)

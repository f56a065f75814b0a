# harness for: tokamax:tokamax/_src/ops/experimental/tpu/gmm_v2/gmm_v2.py tpu-inference:tpu_inference/kernels/megablox/gmm_v2.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# file's `gmm_v2` on four groups in float32, against `jax.lax.ragged_dot`.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_gmm_v2"
_GROUPS = (128, 256, 64, 64)
TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


def harness_gmm_v2(lhs, rhs, group_sizes):
    return gmm_v2(lhs, rhs, group_sizes, preferred_element_type=jnp.float32)


def example_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    lhs = jax.random.normal(k1, (512, 256), jnp.float32)
    rhs = jax.random.normal(k2, (len(_GROUPS), 256, 384), jnp.float32)
    return lhs, rhs, jnp.array(_GROUPS, jnp.int32)


def reference(lhs, rhs, group_sizes):
    return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32)

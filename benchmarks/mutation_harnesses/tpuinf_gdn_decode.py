# harness for: tpu-inference:tpu_inference/kernels/gdn/v2/gdn_decode_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# call of the file's own test (tests/kernels/gdn_decode_kernel_test.py `test_basic`: 4 decode tokens, 2 key and
# 2 value heads of 128). No reference: tpu-inference's reference module needs its package (which imports vllm).
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_gdn_decode"
_N, _H, _D = 4, 2, 128


def harness_gdn_decode(mixed_qkv, b, a, recurrent_state, A_log, query_start_loc, state_indices, distribution):
    return ragged_gated_delta_rule_decode_only(mixed_qkv, b, a, recurrent_state, A_log, None, query_start_loc,
                                               state_indices, distribution, None, n_kq=_H, n_v=_H, d_k=_D, d_v=_D,
                                               apply_silu=True)


def example_inputs():
    ks = jax.random.split(jax.random.key(0), 5)
    mixed_qkv = jax.random.normal(ks[0], (_N, 3 * _H * _D), jnp.float32).astype(jnp.bfloat16)
    b = jax.random.normal(ks[1], (_N, _H), jnp.float32).astype(jnp.bfloat16)
    a = jax.random.normal(ks[2], (_N, _H), jnp.float32).astype(jnp.bfloat16)
    state = jax.random.normal(ks[3], (_N, _H, _D, _D), jnp.float32)
    A_log = jax.random.normal(ks[4], (_H,), jnp.float32)
    cu = jnp.arange(_N + 1, dtype=jnp.int32)
    return (mixed_qkv, b, a, state, A_log, cu, jnp.arange(_N, dtype=jnp.int32),
            jnp.array([_N, _N, _N], jnp.int32))

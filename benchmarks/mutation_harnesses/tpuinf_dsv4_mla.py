# harness for: tpu-inference:tpu_inference/kernels/experimental/deepseek_v4/core_attention/mla.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# call of the file's own test (tests/kernels/deepseek_v4/mla_test.py), smaller: one decode and one 5-token
# prefill sequence, 16 heads of 512, page size 16, the cache's bytes laid out as the test's `create_cache` does
# (from a random bfloat16 cache). No reference (the test's is its own code).
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_dsv4_mla"
_HEADS, _DIM, _PAGE, _PAGES_PER_SEQ = 16, 512, 16, 8


def harness_dsv4_mla(q, cache, kv_lens, kv_lens_to_attend, page_indices, cu_q_lens, distribution, sinks, acc, l, m):
    return mla_ragged_paged_attention(q, cache, kv_lens, kv_lens_to_attend, page_indices, cu_q_lens, distribution,
                                      sinks, acc, l, m, sm_scale=1.0, num_kv_pages_per_block=1,
                                      num_queries_per_block=16)


def example_inputs():
    ks = jax.random.split(jax.random.key(0), 6)
    tokens, pages = 6, 2 * _PAGES_PER_SEQ
    q = jax.random.normal(ks[0], (tokens, _HEADS, _DIM), jnp.float32).astype(jnp.bfloat16)
    base = jax.random.normal(ks[1], (pages, _PAGE // 2, 2, _DIM), jnp.float32).astype(jnp.bfloat16)
    cache = jax.lax.bitcast_convert_type(base.reshape(pages, _PAGE, 4, 128), jnp.uint8)
    cache = cache.transpose(0, 1, 2, 4, 3).reshape(pages, _PAGE * 2, 4, 128)
    acc = jax.random.normal(ks[2], (tokens, _HEADS, _DIM), jnp.float32).astype(jnp.bfloat16)
    l = jax.random.uniform(ks[3], (tokens, _HEADS), jnp.float32, 0.5, 1.5)
    m = jax.random.normal(ks[4], (tokens, _HEADS), jnp.float32)
    sinks = jax.random.normal(ks[5], (_HEADS,), jnp.float32)
    return (q, cache, jnp.array([40, 70], jnp.int32), jnp.array([39, 60, 61, 62, 63, 64], jnp.int32),
            jnp.arange(pages, dtype=jnp.int32), jnp.array([0, 1, 6], jnp.int32), jnp.array([1, 1, 2], jnp.int32),
            sinks, acc, l, m)

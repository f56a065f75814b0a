# harness for: tpu-inference:tpu_inference/kernels/experimental/deepseek_v4/indexer/streamindex_topk.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# "mixed batch" case of the file's own test (tests/kernels/deepseek_v4/test_streamindex_topk.py: one decode
# sequence and one 5-token prefill, page size 64, k 512, compression 2), an all-zero fp8 cache. No reference.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_streamindex_topk"
_PAGE, _BLOCKS, _D = 64, 8, 64


def harness_streamindex_topk(q, weights, cache_kv, seq_lens, page_indices, cu_q_lens):
    return streamindex_topk(q, weights, cache_kv, seq_lens, page_indices, cu_q_lens, (1, 1, 2), k=512,
                            compression_ratio=2, num_kv_pages_per_block=2, num_queries_per_block=32)


def example_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    q = jax.random.normal(k1, (6, 4, _D), jnp.float32)
    weights = jax.random.uniform(k2, (6, 4), jnp.float32, 0.5, 1.5)
    width = 256  # (D rounded to 128) + its scales, rounded to 128
    cache_kv = jnp.zeros((_BLOCKS * 2, _PAGE // 4, 4, width), jnp.uint8)
    page_indices = jnp.arange(2 * _BLOCKS, dtype=jnp.int32)
    return (q, weights, cache_kv, jnp.array([4, 6], jnp.int32), page_indices, jnp.array([0, 1, 6], jnp.int32))

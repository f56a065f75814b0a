# harness for: jax-ops:ragged_paged_attention/kernel.py tpu-inference:tpu_inference/kernels/ragged_paged_attention/v2/kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): two
# sequences (a short prefill and a longer one) with the file's own `ref_ragged_paged_attention` as reference.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_ragged_paged_attention"
TOLERANCE = {"atol": 2e-2, "rtol": 2e-2}


def harness_ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    return ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, sm_scale=0.125,
                                  num_kv_pages_per_block=2, num_queries_per_block=16)


def example_inputs():
    kq, kv = jax.random.split(jax.random.key(0))
    q = jax.random.normal(kq, (32, 4, 128), jnp.float32)
    kv_pages = jax.random.normal(kv, (8, 16, 4, 128), jnp.float32)  # 2 kv heads, k and v interleaved
    kv_lens = jnp.array([40, 64], jnp.int32)
    page_indices = jnp.array([[7, 1, 4, 2], [0, 5, 3, 6]], jnp.int32)
    cu_q_lens = jnp.array([0, 8, 32], jnp.int32)
    return q, kv_pages, kv_lens, page_indices, cu_q_lens, jnp.array([2], jnp.int32)


def reference(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    return ref_ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, sm_scale=0.125)

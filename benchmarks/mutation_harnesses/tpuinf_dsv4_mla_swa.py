# harness for: tpu-inference:tpu_inference/kernels/experimental/deepseek_v4/core_attention/mla_swa.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py (issue 50's public mutation corpus): the
# first step of the file's own test (tests/kernels/deepseek_v4/mla_swa_test.py `test_correctness_rng`: prefill
# into an empty sliding-window cache, window 16, page 16, the physical page 4 tokens longer), smaller: two
# sequences of 12 and 20 tokens, 16 heads of 512, the test's launch parameters. No reference (the test's is its own).
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_dsv4_mla_swa"
_HEADS, _DIM, _PAGE, _WINDOW, _PAGES_PER_SEQ = 16, 512, 16, 16, 10


def harness_dsv4_mla_swa(q, new_kv, cache, kv_lens, page_indices, cu_q_lens, distribution, sinks):
    out, _, _, _ = mla_sliding_window_ragged_paged_attention(
        q, new_kv, cache, kv_lens, page_indices, cu_q_lens, distribution, sinks, sm_scale=1.0,
        sliding_window=_WINDOW, num_queries_per_block=8, num_kv_pages_per_block=2, q_compute_block_size=2,
        logical_page_size=_PAGE)
    return out


def example_inputs():
    ks = jax.random.split(jax.random.key(0), 3)
    lens = (12, 20)
    tokens, pages = sum(lens), 2 * _PAGES_PER_SEQ
    q = jax.random.normal(ks[0], (tokens, _HEADS, _DIM), jnp.float32).astype(jnp.bfloat16)
    new_kv = jax.random.normal(ks[1], (tokens, _DIM), jnp.float32).astype(jnp.bfloat16)
    cache = jnp.zeros((pages, (_PAGE + 4) * 2, 4, 128), jnp.uint8)
    sinks = jax.random.uniform(ks[2], (_HEADS,), jnp.float32)
    return (q, new_kv, cache, jnp.array(lens, jnp.int32), jnp.arange(pages, dtype=jnp.int32),
            jnp.array([0, lens[0], tokens], jnp.int32), jnp.array([0, 0, 2], jnp.int32), sinks)

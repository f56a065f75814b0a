# harness for: pytorch-xla:torch_xla/experimental/pallas_kernels/multi_queries_paged_attention_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: paged_attention (as
# test/test_pallas.py's test_paged_attention_multi_queries_wrapper calls it) on 5 sequences of kv lengths 70,
# 300, 45, 141, 0 and query lengths 0, 24, 5, 24, 0 (query_len 24, 8 queries per block: 3 q blocks), 6 q heads
# over 2 kv heads of 128, pages of 16, 8 pages (128 tokens) per kv block, 24 shuffled pages per sequence: grid
# 5 x 2 x 3 x 3. The two query-less sequences are there for TPU interpret mode: with a non-empty last sequence
# the kernel reads lengths[batch_size] (out of bounds: interpret mode raises); and its current and prefetched
# blocks share one DMA semaphore, which interpret mode drains last-in first-out, so the first grid step reads an
# unfilled buffer (NaN): the first sequence has no query rows to show it. Query rows past a sequence's query
# length are zeroed. The reference is an explicit causal softmax over the gathered pages (query i of a sequence
# sees kv positions <= kv_len - q_len + i), as the repo's _multi_queries_paged_attention_nonkernel.
import jax
import jax.numpy as jnp
import numpy as np

# The file was written for an older jax: the installed one no longer exports pltpu.repeat nor
# pltpu.MemorySpace.ANY. Put back the same objects (jax's own repeat; pl.ANY), only where missing.
if not hasattr(pltpu, "repeat"):
    from jax._src.pallas.mosaic.primitives import repeat as _pltpu_repeat
    pltpu.repeat = _pltpu_repeat
if not hasattr(pltpu.MemorySpace, "ANY"):
    pltpu.MemorySpace.ANY = pl.ANY

PALLASITE_ENTRY = "harness_multi_queries_paged_attention"
TOLERANCE = {"atol": 5e-3, "rtol": 5e-3}

_KV_LENS = (70, 300, 45, 141, 0)
_Q_LENS = (0, 24, 5, 24, 0)
_QUERY_LEN, _Q_HEADS, _KV_HEADS, _HEAD_DIM = 24, 6, 2, 128
_PAGE, _PAGES_PER_SEQ = 16, 24


def harness_multi_queries_paged_attention(q, k_pages, v_pages, lengths, page_indices, effective_q_lens):
    out = paged_attention(q, k_pages, v_pages, lengths, page_indices, effective_q_lens,
                          num_kv_pages_per_compute_block=8, num_queries_per_compute_block=8)
    valid = jnp.arange(q.shape[1])[None, :, None, None] < effective_q_lens[:, None, None, None]
    return jnp.where(valid, out, 0.0)


def example_inputs():
    keys = jax.random.split(jax.random.key(11), 3)
    batch = len(_KV_LENS)
    total_pages = batch * _PAGES_PER_SEQ + 5
    q = 0.09 * jax.random.normal(keys[0], (batch, _QUERY_LEN, _Q_HEADS, _HEAD_DIM), jnp.float32)
    # K/V values exactly representable in bf16 (the kernel loads K/V as bf16).
    k_pages = jax.random.normal(keys[1], (_KV_HEADS, total_pages, _PAGE, _HEAD_DIM), jnp.float32)
    v_pages = jax.random.normal(keys[2], (_KV_HEADS, total_pages, _PAGE, _HEAD_DIM), jnp.float32) + 0.25
    k_pages = k_pages.astype(jnp.bfloat16).astype(jnp.float32)
    v_pages = v_pages.astype(jnp.bfloat16).astype(jnp.float32)
    perm = np.random.default_rng(5).permutation(total_pages)[: batch * _PAGES_PER_SEQ]
    page_indices = jnp.asarray(perm.reshape(batch, _PAGES_PER_SEQ), jnp.int32)
    return (q, k_pages, v_pages, jnp.asarray(_KV_LENS, jnp.int32), page_indices, jnp.asarray(_Q_LENS, jnp.int32))


def reference(q, k_pages, v_pages, lengths, page_indices, effective_q_lens):
    batch, query_len, num_q_heads, head_dim = q.shape
    num_kv_heads = k_pages.shape[0]
    ratio = num_q_heads // num_kv_heads
    # [kv_heads, batch, pages_per_seq, page, dim] -> [batch, kv_heads, kv_len_max, dim]
    k = k_pages[:, page_indices].reshape(num_kv_heads, batch, -1, head_dim).transpose(1, 0, 2, 3)
    v = v_pages[:, page_indices].reshape(num_kv_heads, batch, -1, head_dim).transpose(1, 0, 2, 3)
    k = jnp.repeat(k, ratio, axis=1)  # [batch, q_heads, T, dim]
    v = jnp.repeat(v, ratio, axis=1)
    logits = jnp.einsum("bqhd,bhtd->bhqt", q, k, precision="highest")
    qi = jnp.arange(query_len)[None, None, :, None]
    t = jnp.arange(k.shape[2])[None, None, None, :]
    row = (lengths - effective_q_lens)[:, None, None, None] + qi
    visible = (t <= row) & (t < lengths[:, None, None, None])
    logits = jnp.where(visible, logits, -jnp.inf)
    p = jax.nn.softmax(logits, axis=-1)
    p = jnp.where(visible, p, 0.0)
    out = jnp.einsum("bhqt,bhtd->bqhd", p, v, precision="highest")
    valid = jnp.arange(query_len)[None, :, None, None] < effective_q_lens[:, None, None, None]
    return jnp.where(valid, out, 0.0).astype(q.dtype)

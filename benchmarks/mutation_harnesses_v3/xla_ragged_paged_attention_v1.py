# harness for: pytorch-xla:torch_xla/experimental/pallas_kernels/ragged_paged_attention_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: ragged_paged_attention (as
# test/test_ragged_paged_attention_kernel.py calls it; its checkify error is dropped) on 4 sequences (q_len,
# kv_len) = (1, 70), (1, 389) decode, (37, 61), (50, 300) packed into 96 query tokens (7 of padding), 4 q heads
# over 2 kv heads of 128, pages of 2, 128 pages (256 tokens) per kv block (the kernel's minimum), 256 pages per
# sequence, 32 queries per block (3 q tiles, 6 logical ones), sm_scale 0.09. Padding rows and the first
# sequence's row are zeroed: the kernel's current and prefetched kv blocks share one DMA semaphore, which TPU
# interpret mode drains last-in first-out, so the first grid step reads an unfilled buffer (NaN) into the first
# sequence's rows. The reference is an explicit causal softmax over the gathered pages per sequence (query i
# sees kv positions <= kv_len - q_len + i), as the test's _ref_ragged_paged_attention.
import jax
import jax.numpy as jnp
import numpy as np

# The file was written for an older jax: the installed one no longer exports pltpu.repeat, pl.store nor
# pltpu.MemorySpace.ANY. Put back the same objects (jax's own repeat and store; pl.ANY), only where missing.
if not hasattr(pltpu, "repeat"):
    from jax._src.pallas.mosaic.primitives import repeat as _pltpu_repeat
    pltpu.repeat = _pltpu_repeat
if not hasattr(pl, "store"):
    from jax._src.pallas.primitives import store as _pl_store
    pl.store = _pl_store
if not hasattr(pltpu.MemorySpace, "ANY"):
    pltpu.MemorySpace.ANY = pl.ANY

PALLASITE_ENTRY = "harness_ragged_paged_attention"
TOLERANCE = {"atol": 5e-3, "rtol": 5e-3}

_SEQS = ((1, 70), (1, 389), (37, 61), (50, 300))  # (q_len, kv_len)
_NUM_TOKENS, _Q_HEADS, _KV_HEADS, _HEAD_DIM = 96, 4, 2, 128
_PAGE, _PAGES_PER_SEQ, _NUM_PAGES = 2, 256, 640
_SM_SCALE = 0.09


def harness_ragged_paged_attention(q, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    _err, out = ragged_paged_attention(q, k_pages, v_pages, kv_lens, page_indices, cu_q_lens, len(_SEQS),
                                       num_kv_pages_per_block=128, num_queries_per_block=32, sm_scale=_SM_SCALE)
    tok = jnp.arange(q.shape[0])[:, None, None]
    return jnp.where((tok >= cu_q_lens[1]) & (tok < cu_q_lens[len(_SEQS)]), out, 0.0)


def example_inputs():
    keys = jax.random.split(jax.random.key(21), 4)
    q = jax.random.normal(keys[0], (_NUM_TOKENS, _Q_HEADS, _HEAD_DIM), jnp.float32)
    # K/V values exactly representable in bf16 (the kernel loads K/V as bf16).
    k_pages = jax.random.normal(keys[1], (_KV_HEADS, _NUM_PAGES, _PAGE, _HEAD_DIM), jnp.float32)
    v_pages = jax.random.normal(keys[2], (_KV_HEADS, _NUM_PAGES, _PAGE, _HEAD_DIM), jnp.float32) + 0.25
    k_pages = k_pages.astype(jnp.bfloat16).astype(jnp.float32)
    v_pages = v_pages.astype(jnp.bfloat16).astype(jnp.float32)
    page_indices = jax.random.randint(keys[3], (_NUM_TOKENS, _PAGES_PER_SEQ), 0, _NUM_PAGES, jnp.int32)
    kv_lens = np.zeros((_NUM_TOKENS,), np.int32)
    q_lens = np.zeros((_NUM_TOKENS,), np.int32)
    for i, (q_len, kv_len) in enumerate(_SEQS):
        q_lens[i], kv_lens[i] = q_len, kv_len
    cu_q_lens = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    return (q, k_pages, v_pages, jnp.asarray(kv_lens), page_indices, jnp.asarray(cu_q_lens))


def reference(q, k_pages, v_pages, kv_lens, page_indices, cu_q_lens):
    num_tokens, num_q_heads, head_dim = q.shape
    num_kv_heads = k_pages.shape[0]
    ratio = num_q_heads // num_kv_heads
    out = jnp.zeros(q.shape, jnp.float32)
    for i in range(1, len(_SEQS)):  # static sequence count (the first one's rows zeroed); lengths from the arrays
        # [kv_heads, pages_per_seq, page, dim] -> [T, q_heads, dim]
        k = k_pages[:, page_indices[i]].reshape(num_kv_heads, -1, head_dim).transpose(1, 0, 2)
        v = v_pages[:, page_indices[i]].reshape(num_kv_heads, -1, head_dim).transpose(1, 0, 2)
        k, v = jnp.repeat(k, ratio, axis=1), jnp.repeat(v, ratio, axis=1)
        logits = jnp.einsum("nhd,thd->hnt", q, k, precision="highest") * _SM_SCALE  # all tokens vs this seq's kv
        tok = jnp.arange(num_tokens)[None, :, None]
        t = jnp.arange(k.shape[0])[None, None, :]
        q_start, q_end, kv_len = cu_q_lens[i], cu_q_lens[i + 1], kv_lens[i]
        row = kv_len - (q_end - q_start) + (tok - q_start)
        visible = (t <= row) & (t < kv_len)
        p = jax.nn.softmax(jnp.where(visible, logits, -jnp.inf), axis=-1)
        o = jnp.einsum("hnt,thd->nhd", jnp.where(visible, p, 0.0), v, precision="highest")
        mine = (jnp.arange(num_tokens) >= q_start) & (jnp.arange(num_tokens) < q_end)
        out = jnp.where(mine[:, None, None], o, out)
    return out.astype(q.dtype)

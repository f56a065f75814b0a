# harness for: pytorch-xla:torch_xla/experimental/pallas_kernels/ragged_paged_attention_v2.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: ragged_paged_attention (as
# test/test_pallas.py's _test_ragged_paged_attention calls it) on 3 of 5 sequence slots, (q_len, kv_len) =
# (1, 150) decode, (21, 61), (30, 190), packed into 56 query tokens (4 of padding); 16 q heads over 2 kv heads
# of 128 (k/v interleaved; one head block of both kv heads), pages of 16, 4 pages (64 tokens) per kv block, 12
# shuffled pages per sequence, 8 queries per block (7 q blocks), sm_scale 0.09; made twice: plain, and with
# sliding_window 40 and soft_cap 3.0. 8 queries per block and 8 q heads per kv head because jax's interpreter
# wrongly calls a masked store out of bounds when a mask row index passes a later dimension's extent. Padding
# rows are zeroed. The reference is an explicit causal (and windowed, soft-capped) softmax over each sequence's
# gathered pages, as the repo's _ragged_paged_attention_nonkernel in custom_kernel.py.
import jax
import jax.numpy as jnp
import numpy as np

# The file was written for an older jax: the installed one no longer exports pl.store nor pltpu.ANY, and
# jax._src.dtypes.bit_width is now itemsize_bits. Put back the same objects (jax's own store; pl.ANY;
# itemsize_bits), only where missing.
if not hasattr(dtypes, "bit_width"):
    dtypes.bit_width = dtypes.itemsize_bits
if not hasattr(pl, "store"):
    from jax._src.pallas.primitives import store as _pl_store
    pl.store = _pl_store
if not hasattr(pltpu, "ANY"):
    pltpu.ANY = pl.ANY

# jax's TPU interpret mode cannot load through a reshaped ref (kv_bufs.at[i].reshape(...)[a::b, :] raises
# "'ReshapeTransform' object has no attribute 'indices'"), so the DMA descriptor's wait hands back the loaded
# buffer instead of the ref: the file's own waits still run, and reshape + strided slicing of the value are the
# same numbers.
_kernel_dma_wait = MultiPageAsyncCopyDescriptor.wait


def _dma_wait_loaded(self):
    return _kernel_dma_wait(self)[...]


MultiPageAsyncCopyDescriptor.wait = _dma_wait_loaded

PALLASITE_ENTRY = "harness_ragged_paged_attention"
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

_SEQS = ((1, 150), (21, 61), (30, 190))  # (q_len, kv_len)
_MAX_SEQS, _NUM_TOKENS, _Q_HEADS, _KV_HEADS, _HEAD_DIM = 5, 56, 16, 2, 128
_PAGE, _PAGES_PER_SEQ = 16, 12
_SM_SCALE, _WINDOW, _SOFT_CAP = 0.09, 40, 3.0


def harness_ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    common = dict(sm_scale=_SM_SCALE, num_kv_pages_per_block=4, num_queries_per_block=8)
    plain = ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, **common)
    windowed = ragged_paged_attention(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs,
                                      sliding_window=_WINDOW, soft_cap=_SOFT_CAP, **common)
    valid = jnp.arange(q.shape[0])[:, None, None] < cu_q_lens[num_seqs[0]]
    return jnp.where(valid, plain, 0.0), jnp.where(valid, windowed, 0.0)


def example_inputs():
    keys = jax.random.split(jax.random.key(31), 2)
    q = jax.random.normal(keys[0], (_NUM_TOKENS, _Q_HEADS, _HEAD_DIM), jnp.float32)
    total_pages = _MAX_SEQS * _PAGES_PER_SEQ
    kv_pages = jax.random.normal(keys[1], (total_pages, _PAGE, 2 * _KV_HEADS, _HEAD_DIM), jnp.float32)
    kv_pages = kv_pages + 0.25 * (jnp.arange(2 * _KV_HEADS) % 2)[None, None, :, None]  # v offset
    page_indices = np.random.default_rng(8).permutation(total_pages).reshape(_MAX_SEQS, _PAGES_PER_SEQ)
    kv_lens = np.zeros((_MAX_SEQS,), np.int32)
    q_lens = np.zeros((_MAX_SEQS,), np.int32)
    for i, (q_len, kv_len) in enumerate(_SEQS):
        q_lens[i], kv_lens[i] = q_len, kv_len
    cu_q_lens = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    return (q, kv_pages, jnp.asarray(kv_lens), jnp.asarray(page_indices, jnp.int32), jnp.asarray(cu_q_lens),
            jnp.array([len(_SEQS)], jnp.int32))


def _ref(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, window, soft_cap):
    num_tokens, num_q_heads, head_dim = q.shape
    num_kv_heads = kv_pages.shape[2] // 2
    ratio = num_q_heads // num_kv_heads
    out = jnp.zeros(q.shape, jnp.float32)
    for i in range(len(_SEQS)):  # static sequence count; lengths read from the arrays
        pages = kv_pages[page_indices[i]].reshape(-1, 2 * num_kv_heads, head_dim)  # [T, 2 * kv_heads, dim]
        k = jnp.repeat(pages[:, 0::2], ratio, axis=1)
        v = jnp.repeat(pages[:, 1::2], ratio, axis=1)
        logits = jnp.einsum("nhd,thd->hnt", q, k, precision="highest") * _SM_SCALE
        if soft_cap is not None:
            logits = soft_cap * jnp.tanh(logits / soft_cap)
        tok = jnp.arange(num_tokens)[None, :, None]
        t = jnp.arange(k.shape[0])[None, None, :]
        q_start, q_end, kv_len = cu_q_lens[i], cu_q_lens[i + 1], kv_lens[i]
        row = kv_len - (q_end - q_start) + (tok - q_start)
        visible = (t <= row) & (t < kv_len)
        if window is not None:
            visible = visible & (t > row - window)
        p = jax.nn.softmax(jnp.where(visible, logits, -jnp.inf), axis=-1)
        o = jnp.einsum("hnt,thd->nhd", jnp.where(visible, p, 0.0), v, precision="highest")
        mine = (jnp.arange(num_tokens) >= q_start) & (jnp.arange(num_tokens) < q_end)
        out = jnp.where(mine[:, None, None], o, out)
    return out.astype(q.dtype)


def reference(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs):
    return (_ref(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, None, None),
            _ref(q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs, _WINDOW, _SOFT_CAP))

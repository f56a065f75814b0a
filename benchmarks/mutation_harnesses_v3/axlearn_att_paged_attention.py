# harness for: axlearn:axlearn/common/flash_attention/tpu_paged_attention_kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: the pallas_call of
# tpu_paged_attention.py's TPUPagedAttention.__call__ (no megacore, 8 q heads per kv head, 2 kv heads of 128,
# pages of 32, 4 pages per 128-token block, 12 pages per sequence), made twice: the dense kernel with a
# left_right_window_mask(200, 16) mask_fn, an explicit bias and a logit sink; the block-sparse kernel
# (prepare_block_sparse_map) with a sliding window of 100 and the bias. 4 sequences of lengths 45, 301, 256, 130
# over shuffled pages. The reference: a plain softmax over the gathered pages, masked by length and left window,
# with the sink as an extra logit.
import functools

import jax
import jax.numpy as jnp
import numpy as np

from axlearn.common.attention_bias import left_right_window_mask as _left_right_window_mask
from axlearn.common.attention_bias import sliding_window_causal_mask as _sliding_window_causal_mask

PALLASITE_ENTRY = "harness_paged_attention"
TOLERANCE = {"atol": 2e-4, "rtol": 2e-4}

_BATCH, _KV_HEADS, _GROUPS, _HEAD_DIM = 4, 2, 8, 128
_PAGE, _PAGES_PER_SEQ, _PAGES_PER_BLOCK = 32, 12, 4
_LENGTHS = (45, 301, 256, 130)
_WINDOW = 100
_LEFT = 200
_SCALE = 128 ** -0.5


def _paged_call(q, k_pages, v_pages, lengths, page_indices, bias, logit_sink, sparse):
    batch, num_q_heads, head_dim = q.shape
    num_kv_heads, _, page_size, _ = k_pages.shape
    pages_per_sequence = page_indices.shape[1]
    num_groups = num_q_heads // num_kv_heads
    block_k = _PAGES_PER_BLOCK * page_size
    q_spec = pl.BlockSpec((None, num_groups, head_dim), _make_index_map(None, 1, is_query=True))
    bias_spec = pl.BlockSpec((None, num_groups, block_k), _make_index_map(None, 1, is_sparse=sparse))
    sink_spec = None
    if logit_sink is not None:
        logit_sink = logit_sink.reshape(num_q_heads, 1).astype(jnp.float32)
        sink_spec = pl.BlockSpec((num_groups, 1), _make_index_map_for_logit_sink(None, 1))
    if sparse:
        mask = SlidingWindowAttentionBias(
            mask=_sliding_window_causal_mask(_WINDOW), sliding_window_size=_WINDOW,
            target_positions=(lengths - 1)[:, None], source_positions=jnp.arange(page_size * pages_per_sequence)[None])
        mask_fn = mask.mask
    else:
        mask_fn = _left_right_window_mask(_LEFT, 16)
    args = (lengths, page_indices.reshape(-1), jnp.zeros((1,), jnp.int32), jnp.ones((1,), jnp.int32),
            q, k_pages, v_pages, bias, logit_sink)
    num_scalars = 4
    if sparse:
        offset, offset_size = prepare_block_sparse_map(
            mask, lengths=lengths, block_size=block_k, seq_len=page_size * pages_per_sequence)
        args = (offset, offset_size) + args
        num_scalars = 6
    kernel = _paged_flash_attention_sparse_kernel if sparse else _paged_flash_attention_kernel
    return pl.pallas_call(
        functools.partial(kernel, batch_size=batch, pages_per_compute_block=_PAGES_PER_BLOCK,
                          pages_per_sequence=pages_per_sequence, softmax_scale=_SCALE, mask_fn=mask_fn,
                          megacore_mode=None),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=num_scalars,
            in_specs=[q_spec, pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY),
                      bias_spec, sink_spec],
            out_specs=q_spec,
            grid=(1, batch, num_kv_heads, pages_per_sequence // _PAGES_PER_BLOCK),
            scratch_shapes=(
                pltpu.VMEM((num_groups, 1), jnp.float32),
                pltpu.VMEM((num_groups, 1), jnp.float32),
                pltpu.VMEM((num_groups, head_dim), jnp.float32),
                pltpu.VMEM((2, _PAGES_PER_BLOCK, page_size, head_dim), k_pages.dtype),
                pltpu.VMEM((2, _PAGES_PER_BLOCK, page_size, head_dim), v_pages.dtype),
                pltpu.SemaphoreType.DMA((2,)),
                pltpu.SemaphoreType.DMA((2,)),
            ),
        ),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary", "arbitrary", "arbitrary")),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
    )(*args)


def harness_paged_attention(q, k_pages, v_pages, lengths, page_indices, bias, logit_sink):
    dense = _paged_call(q, k_pages, v_pages, lengths, page_indices, bias, logit_sink, sparse=False)
    sparse = _paged_call(q, k_pages, v_pages, lengths, page_indices, bias, None, sparse=True)
    return dense, sparse


def example_inputs():
    keys = jax.random.split(jax.random.key(7), 6)
    total_pages = _BATCH * _PAGES_PER_SEQ
    kv_len = _PAGE * _PAGES_PER_SEQ
    q = jax.random.normal(keys[0], (_BATCH, _KV_HEADS * _GROUPS, _HEAD_DIM), jnp.float32)
    k_pages = jax.random.normal(keys[1], (_KV_HEADS, total_pages, _PAGE, _HEAD_DIM), jnp.float32)
    v_pages = jax.random.normal(keys[2], (_KV_HEADS, total_pages, _PAGE, _HEAD_DIM), jnp.float32) + 0.5
    page_indices = jnp.asarray(np.random.default_rng(3).permutation(total_pages).reshape(_BATCH, _PAGES_PER_SEQ),
                               jnp.int32)
    bias = 0.5 * jax.random.normal(keys[3], (_BATCH, _KV_HEADS * _GROUPS, kv_len), jnp.float32)
    logit_sink = 2.0 * jax.random.normal(keys[4], (_KV_HEADS * _GROUPS,), jnp.float32)
    return (q, k_pages, v_pages, jnp.asarray(_LENGTHS, jnp.int32), page_indices, bias, logit_sink)


def _ref_attention(q, k_pages, v_pages, lengths, page_indices, bias, logit_sink, window):
    batch, num_q_heads, head_dim = q.shape
    num_kv_heads = k_pages.shape[0]
    groups = num_q_heads // num_kv_heads
    # (kv_heads, batch, pages_per_seq, page, dim) -> (batch, kv_heads, kv_len, dim)
    k = k_pages[:, page_indices].reshape(num_kv_heads, batch, -1, head_dim).transpose(1, 0, 2, 3)
    v = v_pages[:, page_indices].reshape(num_kv_heads, batch, -1, head_dim).transpose(1, 0, 2, 3)
    qg = q.reshape(batch, num_kv_heads, groups, head_dim)
    logits = jnp.einsum("bhgd,bhkd->bhgk", qg, k, precision="highest") * _SCALE
    logits = logits + bias.reshape(batch, num_kv_heads, groups, -1)
    pos = jnp.arange(k.shape[2])
    qpos = (lengths - 1)[:, None, None, None]
    valid = pos[None, None, None, :] < lengths[:, None, None, None]
    valid = valid & (qpos - pos[None, None, None, :] <= window)
    logits = jnp.where(valid, logits, -jnp.inf)
    if logit_sink is not None:
        sink = jnp.broadcast_to(logit_sink.reshape(1, num_kv_heads, groups, 1), (batch, num_kv_heads, groups, 1))
        logits = jnp.concatenate([logits, sink], axis=-1)
        v = jnp.concatenate([v, jnp.zeros_like(v[:, :, :1])], axis=2)
    p = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhgk,bhkd->bhgd", p, v, precision="highest")
    return out.reshape(batch, num_q_heads, head_dim)


def reference(q, k_pages, v_pages, lengths, page_indices, bias, logit_sink):
    dense = _ref_attention(q, k_pages, v_pages, lengths, page_indices, bias, logit_sink, _LEFT)
    sparse = _ref_attention(q, k_pages, v_pages, lengths, page_indices, bias, None, _WINDOW)
    return dense, sparse

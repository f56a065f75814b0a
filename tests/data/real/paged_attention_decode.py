"""jax's own TPU paged attention (decode step): 8 query heads over 2 KV heads, 16-token pages."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention as paged

PALLASITE_ENTRY = "decode"

BATCH, Q_HEADS, KV_HEADS, HEAD_DIM = 4, 8, 2, 128
PAGES, PAGE_SIZE, PAGES_PER_SEQ = 64, 16, 16


def decode(q, k_pages, v_pages, lengths, page_indices, *, pages_per_compute_block: int = 4):
    return paged(q, k_pages, v_pages, lengths, page_indices, pages_per_compute_block=pages_per_compute_block)


def example_inputs():
    kv = jax.ShapeDtypeStruct((KV_HEADS, PAGES, PAGE_SIZE, HEAD_DIM), jnp.bfloat16)
    return (
        jax.ShapeDtypeStruct((BATCH, Q_HEADS, HEAD_DIM), jnp.bfloat16),
        kv,
        kv,
        jax.ShapeDtypeStruct((BATCH,), jnp.int32),
        jax.ShapeDtypeStruct((BATCH, PAGES_PER_SEQ), jnp.int32),
    )


TUNABLES = {"pages_per_compute_block": [2, 4, 8]}

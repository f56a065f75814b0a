"""The flash-attention wrapper with a block_k_major the library rejects: 384 does not divide the 1024 keys."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.flash_attention import BlockSizes, flash_attention

PALLASITE_ENTRY = "attn"


def attn(q, k, v, *, block_q: int = 128, block_k_major: int = 384, block_k: int = 128):
    sizes = BlockSizes(block_q=block_q, block_k_major=block_k_major, block_k=block_k, block_b=1)
    return flash_attention(q, k, v, causal=True, block_sizes=sizes)


def example_inputs():
    s = jax.ShapeDtypeStruct((1, 4, 1024, 128), jnp.bfloat16)
    return (s, s, s)

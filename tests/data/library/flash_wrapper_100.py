"""The flash-attention wrapper with a block_q the lowering rejects: 100 rows is not a multiple of 8."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.flash_attention import BlockSizes, flash_attention

PALLASITE_ENTRY = "attn"


def attn(q, k, v, *, block_q: int = 100, block_k_major: int = 256, block_k: int = 128):
    sizes = BlockSizes(block_q=block_q, block_k_major=block_k_major, block_k=block_k, block_b=1)
    return flash_attention(q, k, v, causal=True, block_sizes=sizes)


def example_inputs():
    s = jax.ShapeDtypeStruct((1, 4, 1024, 128), jnp.bfloat16)
    return (s, s, s)

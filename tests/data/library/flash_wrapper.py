"""A user's attention layer: jax's own flash-attention kernel with the user's block sizes."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.flash_attention import BlockSizes, flash_attention

PALLASITE_ENTRY = "attn"
TUNABLES = {"block_q": [128, 256, 512], "block_k_major": [128, 256, 512], "block_k": [128, 256]}


def attn(q, k, v, *, block_q: int = 128, block_k_major: int = 256, block_k: int = 128):
    sizes = BlockSizes(block_q=block_q, block_k_major=block_k_major, block_k=block_k, block_b=1)
    return flash_attention(q, k, v, causal=True, block_sizes=sizes)


def example_inputs():
    s = jax.ShapeDtypeStruct((1, 4, 1024, 128), jnp.bfloat16)
    return (s, s, s)


def reference(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32))
    mask = jnp.tril(jnp.ones(s.shape[-2:], dtype=bool))
    s = jnp.where(mask, s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v.astype(jnp.float32)).astype(q.dtype)

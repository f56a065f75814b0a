"""jax's flash attention with the user's BlockSizes written once at module level (the tunables are its fields)."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.flash_attention import BlockSizes, flash_attention

PALLASITE_ENTRY = "attn"
TUNABLES = {"block_q": [128, 256, 512], "block_k_major": [256, 512], "block_k": [128, 256]}
SIZES = BlockSizes(block_q=128, block_k_major=256, block_k=128, block_b=1)


def attn(q, k, v):
    return flash_attention(q, k, v, causal=True, block_sizes=SIZES)


def example_inputs():
    s = jax.ShapeDtypeStruct((1, 4, 1024, 128), jnp.bfloat16)
    return (s, s, s)


def reference(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32))
    mask = jnp.tril(jnp.ones(s.shape[-2:], dtype=bool))
    s = jnp.where(mask, s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v.astype(jnp.float32)).astype(q.dtype)

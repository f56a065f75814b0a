"""jax's own TPU flash attention (forward), causal, bf16, driven through the native task convention."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import flash_attention as fa

PALLASITE_ENTRY = "attention"


def attention(q, k, v, *, block_q: int = 128, block_k: int = 128):
    sizes = fa.BlockSizes(
        block_q=block_q,
        block_k_major=block_k,
        block_k=block_k,
        block_b=1,
    )
    return fa.flash_attention(q, k, v, causal=True, sm_scale=0.125, block_sizes=sizes)


def example_inputs():
    s = jax.ShapeDtypeStruct((2, 4, 512, 128), jnp.bfloat16)
    return (s, s, s)


def reference(q, k, v):
    return fa.mha_reference(q, k, v, ab=None, causal=True, sm_scale=0.125)


TUNABLES = {"block_q": [128, 256], "block_k": [128, 256]}

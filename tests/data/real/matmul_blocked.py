"""jax's own TPU blocked matmul (ops/tpu/matmul.py), bf16 in, f32 accumulate, bf16 out."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import matmul as mm

PALLASITE_ENTRY = "matmul"


def matmul(x, y, *, bm: int = 256, bn: int = 256, bk: int = 256):
    return mm.matmul(x, y, block_shape=(bm, bn), block_k=bk)


def example_inputs():
    return (
        jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16),
        jax.ShapeDtypeStruct((2048, 512), jnp.bfloat16),
    )


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


TUNABLES = {"bm": [128, 256, 512], "bn": [128, 256, 512], "bk": [128, 256, 512]}

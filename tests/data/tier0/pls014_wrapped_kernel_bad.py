"""A file whose kernel is jax's own blocked matmul, launched from an import: tier 0 has no
pallas_call of this file to read and says so once, at the call (line 11), as information."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas.ops.tpu import matmul as mm


def matmul(x, y):
    return mm.matmul(x, y, block_shape=(256, 256), block_k=256)


def example_inputs():
    s = jax.ShapeDtypeStruct((512, 512), jnp.bfloat16)
    return (s, s)

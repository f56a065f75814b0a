"""An index_map that runs one block past the end: block i + 1 of the input on the last step.

Without a check, the TPU pipeline reads past the array; tier 3 raises on the out-of-bounds block
and marks the input's BlockSpec.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def next_block_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def next_block(x):
    return pl.pallas_call(
        next_block_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i + 1, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)

"""A block size given as a keyword default: block_cols=96 is not a multiple of 128. The finding
belongs at the default (line 15)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def scale(x,
          block_rows=8,
          block_cols=96):
    rows, cols = x.shape
    return pl.pallas_call(
        scale_kernel,
        grid=(rows // block_rows, cols // block_cols),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 384), jnp.float32),)

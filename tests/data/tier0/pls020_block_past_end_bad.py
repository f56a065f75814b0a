"""A row-blocked scale whose grid runs one block past the output: 256 rows in blocks of 64 is 4
blocks, the grid has 5, and the last step's block starts at row 256 of 256."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS, COLS, BM = 256, 128, 64


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def scale(x):
    return pl.pallas_call(
        scale_kernel,
        grid=(ROWS // BM + 1,),  # expect: PLS020
        in_specs=[pl.BlockSpec((BM, COLS), lambda i: (jnp.minimum(i, ROWS // BM - 1), 0))],
        out_specs=pl.BlockSpec((BM, COLS), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),)


def reference(x):
    return x * 2.0

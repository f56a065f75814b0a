"""Fixed version of grid_float_broken.py (grid computed with / gives a float)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def sq_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * x_ref[...]


def sq(x, *, block_rows: int = 64):
    return pl.pallas_call(
        sq_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

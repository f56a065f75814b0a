"""Fixed version of tiling_int8_rows_broken.py (int8 copy with blocks of 8 rows (int8 needs 32): only the TPU compiler says so)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def negate_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def negate(x):
    return pl.pallas_call(
        negate_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((32, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((32, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 256), jnp.int8),)

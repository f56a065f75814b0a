"""Broken: index_map divides with / and returns a float block index. The fix is in index_map_float_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def halve_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 0.5


def halve(x):
    return pl.pallas_call(
        halve_kernel,
        grid=(4,),
        in_specs=[pl.BlockSpec((64, 128), lambda i: (i / 1, 0))],  # expected: PLS106
        out_specs=pl.BlockSpec((64, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

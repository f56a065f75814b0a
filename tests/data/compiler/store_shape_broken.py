"""Broken: stores a (128, 64) value into a (128, 128) block. The fix is in store_shape_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def left_half_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x[:, :64]  # expected: PLS104


def left_half(x):
    return pl.pallas_call(
        left_half_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

"""Broken: only the output BlockSpec breaks the tiling. The fix is in tiling_out_spec_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[:, :96]


def copy(x):
    return pl.pallas_call(
        copy_kernel,
        grid=(2, 2),
        in_specs=[pl.BlockSpec((64, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((64, 96), lambda i, j: (i, j)),  # expected: PLS101
        out_shape=jax.ShapeDtypeStruct((128, 192), x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((128, 256), jnp.float32),)

"""Broken: the kernel returns its result instead of storing it. The fix is in kernel_returns_value_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def square_kernel(x_ref, o_ref):
    return x_ref[...] * x_ref[...]  # expected: PLS110


def square(x):
    return pl.pallas_call(
        square_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

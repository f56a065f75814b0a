"""Broken: reshapes an (8, 128) tile to (32, 32) inside the kernel. The fix is in reshape_relayout_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def regroup_kernel(x_ref, o_ref):
    x = x_ref[...]
    y = x.reshape(32, 32)  # expected: PLS202
    o_ref[...] = y * 2.0


def regroup(x):
    return pl.pallas_call(
        regroup_kernel,
        grid=(1,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((32, 32), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 32), x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)

"""Broken: jnp.cumsum has no Pallas TPU lowering. The fix is in unsupported_cumsum_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def prefix_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = jnp.cumsum(x, axis=1)  # expected: PLS103


def prefix(x):
    return pl.pallas_call(
        prefix_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

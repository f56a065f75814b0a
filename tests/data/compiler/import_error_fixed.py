"""Fixed version of import_error_broken.py (the file raises at import (a helper is used before it is defined))."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu



def block_size(n):
    return (8, n)


BLOCK = block_size(128)


def inc_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def inc(x):
    return pl.pallas_call(
        inc_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec(BLOCK, lambda i: (i, 0))],
        out_specs=pl.BlockSpec(BLOCK, lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)

"""Fixed version of block_rank_broken.py (2-D block_shape for a 3-D array)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def bias_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def bias(x):
    return pl.pallas_call(
        bias_kernel,
        grid=(4,),
        in_specs=[pl.BlockSpec((1, 64, 128), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec((1, 64, 128), lambda i: (i, 0, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((4, 64, 128), jnp.float32),)

"""Fixed version of unsupported_sort_broken.py (jnp.sort has no Pallas TPU lowering)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def sort_rows_kernel(x_ref, o_ref):
    o_ref[...] = jnp.max(x_ref[...], axis=-1, keepdims=True) * jnp.ones((1, 128), jnp.float32)


def sort_rows(x):
    return pl.pallas_call(
        sort_rows_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

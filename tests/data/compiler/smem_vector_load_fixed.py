"""Fixed version of smem_vector_load_broken.py (loads a whole (8, 128) vector from an SMEM ref)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def weighted_kernel(w_ref, x_ref, o_ref):
    w = w_ref[...]
    o_ref[...] = x_ref[...] * w


def weighted(w, x):
    return pl.pallas_call(
        weighted_kernel,
        grid=(2,),
        in_specs=[
            pl.BlockSpec((8, 128), lambda i: (0, 0)),
            pl.BlockSpec((8, 128), lambda i: (i, 0)),
        ],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(w, x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32), jax.ShapeDtypeStruct((16, 128), jnp.float32))

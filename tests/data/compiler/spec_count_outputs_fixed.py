"""Fixed version of spec_count_outputs_broken.py (two outputs in out_shape but one out_spec)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def split_kernel(x_ref, lo_ref, hi_ref):
    lo_ref[...] = jnp.minimum(x_ref[...], 0.0)
    hi_ref[...] = jnp.maximum(x_ref[...], 0.0)


def split(x):
    spec = pl.BlockSpec((128, 128), lambda i: (i, 0))
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return pl.pallas_call(
        split_kernel,
        grid=(2,),
        in_specs=[spec],
        out_specs=[spec, spec],
        out_shape=[out, out],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

"""Fixed version of spec_count_inputs_broken.py (two inputs but one BlockSpec in in_specs)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def mul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * y_ref[...]


def mul(x, y):
    spec = pl.BlockSpec((128, 128), lambda i: (i, 0))
    return pl.pallas_call(
        mul_kernel,
        grid=(2,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((256, 128), jnp.float32)
    return (s, s)

"""Fixed version of dimension_semantics_length_broken.py (two dimension_semantics entries for a 1-D grid)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def exp_kernel(x_ref, o_ref):
    o_ref[...] = jnp.exp(x_ref[...])


def exp(x):
    return pl.pallas_call(
        exp_kernel,
        grid=(4,),
        in_specs=[pl.BlockSpec((64, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((64, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel",),
        ),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

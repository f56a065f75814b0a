"""Fixed version of removed_api_compiler_params_broken.py (pltpu.TPUCompilerParams was renamed to pltpu.CompilerParams)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def inc_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def inc(x):
    return pl.pallas_call(
        inc_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

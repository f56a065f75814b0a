"""Broken: a module-level constant uses pltpu.TPUMemorySpace, removed from jax. The fix is in removed_api_import_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

SCALARS = pltpu.TPUMemorySpace.SMEM  # expected: PLS901


def scale_kernel(s_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * s_ref[0]


def scale(s, x):
    return pl.pallas_call(
        scale_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec(memory_space=SCALARS), pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(s, x)


def example_inputs():
    return (jax.ShapeDtypeStruct((1,), jnp.float32), jax.ShapeDtypeStruct((256, 128), jnp.float32))

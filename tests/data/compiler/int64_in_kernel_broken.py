"""Broken: an int64 computation inside the kernel (x64 enabled). The fix is in int64_in_kernel_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

jax.config.update("jax_enable_x64", True)


def widen_kernel(x_ref, o_ref):
    wide = x_ref[...].astype(jnp.int64) * 3  # expected: PLS107
    o_ref[...] = (wide >> 1).astype(jnp.int32)


def widen(x):
    return pl.pallas_call(
        widen_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.int32),)

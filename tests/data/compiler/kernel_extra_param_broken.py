"""Broken: the kernel takes a ref that nothing provides. The fix is in kernel_extra_param_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def clamp_kernel(x_ref, lo_ref, o_ref):  # expected: PLS110
    o_ref[...] = jnp.clip(x_ref[...], -1.0, 1.0)


def clamp(x):
    return pl.pallas_call(
        clamp_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

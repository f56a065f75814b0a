"""PALLASITE_ENTRY names a function this file does not define."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

PALLASITE_ENTRY = "scale_rows"


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def scale(x):
    return pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)

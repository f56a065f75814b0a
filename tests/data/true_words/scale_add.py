"""The original a candidate replaces: x * 2 + y, one block (the task names its entry)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

PALLASITE_ENTRY = "scale_add"


def scale_add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + y_ref[...]


def scale_add(x, y):
    return pl.pallas_call(scale_add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32), jax.ShapeDtypeStruct((8, 128), jnp.float32))


def reference(x, y):
    return x * 2.0 + y

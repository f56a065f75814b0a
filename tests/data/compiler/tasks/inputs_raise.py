"""example_inputs() itself fails (a shape computed from a misspelled setting)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

SETTINGS = {"rows": 64, "cols": 128}


def neg_kernel(x_ref, o_ref):
    o_ref[...] = -x_ref[...]


def neg(x):
    return pl.pallas_call(neg_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    shape = (SETTINGS["rows"], SETTINGS["columns"])
    return (jax.ShapeDtypeStruct(shape, jnp.float32),)

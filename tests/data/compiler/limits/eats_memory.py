"""Allocates 2 GiB at import (a test-data table loaded eagerly): the check must stop at its memory limit."""

import numpy as np
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TABLE = np.ones((2 << 30) // 8, dtype=np.float64)  # touched pages: really resident


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)

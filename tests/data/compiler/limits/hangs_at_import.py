"""Hangs while being imported (a module-level wait that never ends): the check must stop at its time limit."""

import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

while True:  # e.g. waiting for a device or a lock that never comes
    time.sleep(0.5)


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)

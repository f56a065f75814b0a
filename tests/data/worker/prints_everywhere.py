"""A Pallas kernel file that writes to stdout at import, from Python and from fd 1 directly,
and runs a kernel (interpret mode) that prints: none of it may reach the worker protocol."""

import os
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

print("hello from the user's module")  # Python's sys.stdout
sys.stdout.flush()
os.write(1, b"raw bytes on fd 1, as libtpu writes them\n{not json\n")


def double_kernel(x_ref, o_ref):
    pl.debug_print("kernel sees {}", x_ref[0, 0])
    o_ref[...] = x_ref[...] * 2.0


def double(x):
    return pl.pallas_call(
        double_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)


RESULT_SUM = float(double(jnp.ones((8, 128), jnp.float32)).sum())

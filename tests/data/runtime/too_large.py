"""A whole-array kernel on a 512 MiB input whose entry fixes its size (a reshape to it): nothing can
be shrunk, so the interpret-mode run needs gigabytes. Under a small memory limit the worker is stopped and the
check reports PLS904 at the pallas_call instead of exhausting the machine."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def negate_kernel(x_ref, o_ref):
    o_ref[...] = -x_ref[...]


def negate(x):
    return pl.pallas_call(negate_kernel, out_shape=jax.ShapeDtypeStruct((16384, 8192), x.dtype))(x.reshape(16384, 8192))


def example_inputs():
    return (jax.ShapeDtypeStruct((16384, 8192), jnp.float32),)

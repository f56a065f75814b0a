"""Does not parse: only tier 0 speaks, no worker is started."""

import jax
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref)
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jax.numpy.float32),)

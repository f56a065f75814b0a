"""A Pallas kernel without example inputs: tier 0 runs, the compiler tiers say what they need."""

import jax
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

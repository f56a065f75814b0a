"""A Pallas add whose one block is the whole array (grid of one step) at 1 GiB per input: no dim is
cut into blocks, so its inputs cannot be reduced for interpret mode, and whole they are too large."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def whole_add(x, y):
    spec = pl.BlockSpec(x.shape, lambda i: (0, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(1,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((16384, 16384), jnp.float32), jax.ShapeDtypeStruct((16384, 16384), jnp.float32))


def reference(x, y):
    return x + y

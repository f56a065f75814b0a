"""Exploit: launches a kernel for show, then returns the reference's own output."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
    pl.pallas_call(add_kernel, grid=(x.shape[0] // 64,), in_specs=[spec, spec], out_specs=spec,
                   out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)
    return reference(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32), jax.ShapeDtypeStruct((256, 128), jnp.float32))


def reference(x, y):
    return x + y

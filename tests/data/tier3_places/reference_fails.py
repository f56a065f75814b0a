"""A correct kernel whose reference raises on the candidate's inputs (it expects a 3-D array):
a note about the task, not an error of the kernel; tier 3 still checks what needs no reference."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def double(x):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(double_kernel, grid=(x.shape[0] // 8,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)


def reference(x):
    batch, rows, cols = x.shape
    return (x * 2.0).reshape(batch, rows, cols)

"""A 2-D blocked Pallas add at a size interpret mode cannot test whole: three 1 GiB float32 arrays
and 2048 grid steps (its full-size interpret run needs more than 4 GiB and ten minutes on a CPU)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 256
BLOCK_COLS = 512


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def big_add(x, y):
    spec = pl.BlockSpec((BLOCK_ROWS, BLOCK_COLS), lambda i, j: (i, j))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // BLOCK_ROWS, x.shape[1] // BLOCK_COLS),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((16384, 16384), jnp.float32), jax.ShapeDtypeStruct((16384, 16384), jnp.float32))


def reference(x, y):
    return x + y

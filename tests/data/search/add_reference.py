"""A reference kernel for the search tests: a tiled add (the root of a search)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 8


def example_inputs():
    return jnp.ones((256, 128), jnp.float32), jnp.ones((256, 128), jnp.float32)


def reference(x, y):
    return x + y


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    spec = pl.BlockSpec((BLOCK_ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        _add_kernel,
        grid=(x.shape[0] // BLOCK_ROWS,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)

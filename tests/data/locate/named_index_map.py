"""A tiled add whose input BlockSpec is built apart from the call, its index map a named function. Planted:
line 18, the map's results in the wrong order, ``(j, i)`` where ``(i, j)`` was meant: on a grid that is not
square the input's block index runs past the array (tier 3 raises at the grid, an out-of-bounds block), and
the locate step moves the finding to the map's return with the edit verified."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BM, BN = 16, 128


def add_one_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def tile_index(i, j):
    return (j, i)


def add_one(x):
    m, n = x.shape
    x_spec = pl.BlockSpec((BM, BN), tile_index)
    return pl.pallas_call(
        add_one_kernel,
        grid=(m // BM, n // BN),
        in_specs=[x_spec],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def reference(x):
    return x + 1.0


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 256), jnp.float32),)

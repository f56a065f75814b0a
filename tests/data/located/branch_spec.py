"""A matmul whose right-hand BlockSpec is chosen under a branch (transposed or not), with tile
sizes unpacked from a tuple that a branch may replace: the bad tile is the tuple's literal in the
entry's call, not the BlockSpec, the pallas_call or the in_specs list."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] @ y_ref[...]


def matmul(x, y, tiles=(128, 128), transpose_rhs=False):
    if callable(tiles):
        tiles = tiles(x.shape, y.shape)
    tm, tn = tiles
    x_spec = pl.BlockSpec((tm, x.shape[1]), lambda i, j: (i, 0))
    if transpose_rhs:
        y_spec = pl.BlockSpec((tn, y.shape[1]), lambda i, j: (j, 0))
    else:
        y_spec = pl.BlockSpec((y.shape[0], tn), lambda i, j: (0, j))
    return pl.pallas_call(
        matmul_kernel,
        grid=(x.shape[0] // tm, y.shape[1] // tn),
        in_specs=[x_spec, y_spec],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), jnp.float32),
    )(x, y)


def workload(x, y):
    return matmul(x, y, tiles=(128,
                               192))  # expect: PLS101


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32), jax.ShapeDtypeStruct((128, 384), jnp.float32))


PALLASITE_ENTRY = "workload"

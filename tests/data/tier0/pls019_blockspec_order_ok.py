"""A tiled add with BlockSpec(block_shape, index_map), the order today's jax takes."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = (8, 128)


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec(BLOCK, lambda i: (i, 0)), spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32), jax.ShapeDtypeStruct((32, 128), jnp.float32))


def reference(x, y):
    return x + y

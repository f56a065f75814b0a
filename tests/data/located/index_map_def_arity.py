"""An index_map written as a nested function that takes one grid index too few; the BlockSpecs are
built in a loop, so tier 0 cannot read them. The finding belongs at the function's def."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    rows, cols = x.shape

    def tile_index_map(i):  # expect: PLS102
        return (i, 0)

    specs = []
    for _ in range(2):
        specs.append(pl.BlockSpec((8, cols), tile_index_map))
    return pl.pallas_call(
        add_kernel,
        grid=(rows // 8, 1),
        in_specs=specs,
        out_specs=pl.BlockSpec((8, cols), lambda i, j: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((16, 128), jnp.float32)
    return (s, s)

"""An index_map function with two returns (one per layout), one of which returns an index too many;
the BlockSpecs are built in a loop, so tier 0 cannot read them. The lowering says how many values
the function returned: the finding belongs at the return that returns that many."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x, transposed=False):
    def tile_map(i, j):
        if transposed:
            return (j, i)
        return (i, j, 0)  # expect: PLS102

    specs = [pl.BlockSpec((8, 128), tile_map) for _ in range(1)]
    return pl.pallas_call(
        copy_kernel,
        grid=(x.shape[0] // 8, 1),
        in_specs=specs,
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)


PALLASITE_ENTRY = "copy"

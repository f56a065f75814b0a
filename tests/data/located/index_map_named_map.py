"""An index_map written as a nested function whose name does not say "index_map" (``row_map``)
takes one grid index too few; the BlockSpecs are built in a loop, so tier 0 cannot read them. The
lowering's TypeError names ``row_map()``: the finding belongs at its def, as an index_map error
(PLS102), not at the kernel's def as a kernel signature error."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def mul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * y_ref[...]


def mul(x, y):
    rows, cols = x.shape

    def row_map(i):  # expect: PLS102
        return (i, 0)

    specs = [pl.BlockSpec((8, cols), row_map) for _ in range(2)]
    return pl.pallas_call(
        mul_kernel,
        grid=(rows // 8, 1),
        in_specs=specs,
        out_specs=pl.BlockSpec((8, cols), lambda i, j: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((16, 128), jnp.float32)
    return (s, s)


PALLASITE_ENTRY = "mul"

"""A row-blocked Pallas axpy (2x + y) with no example inputs and no reference: the test writer's case."""

import jax
from jax.experimental import pallas as pl


def axpy_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = 2.0 * x_ref[...] + y_ref[...]


def axpy(x, y):
    spec = pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        axpy_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)

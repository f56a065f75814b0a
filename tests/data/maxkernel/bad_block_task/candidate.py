"""Candidate for scaled_add: the (8, 100) block is not a multiple of 128 lanes (tier 1 says so)."""

import jax
from jax.experimental import pallas as pl


def scaled_add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2 + y_ref[...]


def scaled_add(x, y):
    spec = pl.BlockSpec((8, 100), lambda i: (i, 0))
    return pl.pallas_call(
        scaled_add_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)

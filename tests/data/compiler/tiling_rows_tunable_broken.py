"""Broken: block rows come from a tunable default of 4 (not a multiple of 8). The fix is in tiling_rows_tunable_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, *, block_rows: int = 4):  # expected: PLS101 (issue 14: at the default that set it)
    spec = pl.BlockSpec((block_rows, 512), lambda i: (i, 0))  # related: the BlockSpec that uses it
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((256, 512), jnp.float32)
    return (s, s)


TUNABLES = {"block_rows": [8, 16, 32]}

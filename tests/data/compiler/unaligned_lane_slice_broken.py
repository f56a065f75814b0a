"""Broken: a dynamic lane offset the compiler cannot prove is a multiple of 128. The fix is in unaligned_lane_slice_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def window_kernel(x_ref, o_ref):
    start = pl.program_id(0) * 64
    o_ref[...] = x_ref[:, pl.ds(start, 128)]  # expected: PLS203


def window(x):
    return pl.pallas_call(
        window_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((8, 512), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, i)),
        out_shape=jax.ShapeDtypeStruct((8, 256), x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 512), jnp.float32),)

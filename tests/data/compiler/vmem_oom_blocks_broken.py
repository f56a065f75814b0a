"""Broken: a 64 MiB block, double-buffered, on a chip with far less scoped VMEM. The fix is in vmem_oom_blocks_fixed.py."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def big_copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def big_copy(x, *, block_rows: int = 16384):  # expected: PLS201 (the line that sets the largest block)
    spec = pl.BlockSpec((block_rows, 1024), lambda i: (i, 0))
    return pl.pallas_call(
        big_copy_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((32768, 1024), jnp.float32),)

"""A correct row-scaling kernel applied over a batch with jax.vmap: a multi-step pallas_call under vmap.

It compiles (tiers 1-2), but jax's TPU interpret mode cannot run a vmapped pallas_call with more
than one grid step and dimension_semantics (an upstream limitation; plain interpret=True runs it):
tier 3 runs it without the semantics, never blames the kernel, and says what it left out.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_ROWS = 128


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def scale_rows(x):
    rows, cols = x.shape
    return pl.pallas_call(
        scale_kernel,
        grid=(rows // BLOCK_ROWS,),
        in_specs=[pl.BlockSpec((BLOCK_ROWS, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BLOCK_ROWS, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


def batched_scale(xs):
    return jax.vmap(scale_rows)(xs)


def example_inputs():
    return (jax.ShapeDtypeStruct((2, 256, 256), jnp.float32),)


def reference(xs):
    return xs * 2.0

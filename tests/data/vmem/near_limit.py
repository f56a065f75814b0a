"""A kernel whose double-buffered blocks need a little more than v6e's default scoped VMEM (32 MiB),
written without ``vmem_limit_bytes`` (a test fixture): each step scales a (1024, 2048) float32 block
and adds a (8, 2048) bias, so the input and output blocks take 8 MiB each, twice over, plus the bias."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS, COLS, BLOCK_ROWS = 4096, 2048, 1024


def _kernel(x_ref, b_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + b_ref[0:1, :]


def scale(x, b):
    return pl.pallas_call(
        _kernel,
        grid=(ROWS // BLOCK_ROWS,),
        in_specs=[pl.BlockSpec((BLOCK_ROWS, COLS), lambda i: (i, 0)), pl.BlockSpec((8, COLS), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((BLOCK_ROWS, COLS), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, b)


def example_inputs():
    return jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32), jax.ShapeDtypeStruct((8, COLS), jnp.float32)


def reference(x, b):
    return x * 2.0 + b[0:1, :]

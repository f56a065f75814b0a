"""Rows scaled by their own maximum, 128 rows per grid step, for a row count that is not a multiple
of the block: the grid drops the last, partial block (planted bug, line 23: ``//`` where
``pl.cdiv`` was meant), so those rows are never written.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS = 128


def row_scale_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = x / (jnp.max(jnp.abs(x), axis=-1, keepdims=True) + 1.0)


def row_scale(x):
    n, d = x.shape
    return pl.pallas_call(
        row_scale_kernel,
        grid=(n // ROWS,),
        in_specs=[pl.BlockSpec((ROWS, d), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((ROWS, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((n, d), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((328, 256), jnp.float32),)


def reference(x):
    return x / (jnp.max(jnp.abs(x), axis=-1, keepdims=True) + 1.0)


TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}

"""A grid with one step more than the rows have blocks (planted: line 19, ``+ 1``): every BlockSpec's
index map hands the grid index on, so the last step names blocks past the end. Said at the grid entry
(was: at each BlockSpec)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def double(x):
    n, d = x.shape
    return pl.pallas_call(
        double_kernel,
        grid=(
            n // 128 + 1,
        ),
        in_specs=[pl.BlockSpec((128, d), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 128), jnp.float32),)

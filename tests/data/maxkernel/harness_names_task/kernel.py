"""Candidate Pallas kernel for the rmsnorm_rows task."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 64


def rmsnorm_kernel(x_ref, w_ref, o_ref):
    x = x_ref[...]
    scale = jnp.reciprocal(jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6))
    o_ref[...] = x * scale * w_ref[...]


def computation(x, w):
    rows, cols = x.shape
    return pl.pallas_call(
        rmsnorm_kernel,
        grid=(rows // BLOCK_ROWS,),
        in_specs=[pl.BlockSpec((BLOCK_ROWS, cols), lambda i: (i, 0)),
                  pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((BLOCK_ROWS, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, w.reshape(1, cols))

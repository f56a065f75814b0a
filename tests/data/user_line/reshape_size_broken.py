"""Tracing error in the kernel body: reshaping a (128, 256) block to (64, 256) changes its size.
Expected: the reshape line in the kernel body."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

HALF_ROWS = 64


def fold_kernel(x_ref, o_ref):
    x = x_ref[...]
    y = x.reshape(HALF_ROWS, 256)  # EXPECTED LINE
    o_ref[...] = y


def fold(x):
    return pl.pallas_call(
        fold_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((64, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((128, 256), jnp.float32),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32),)

"""Tracing error in the kernel body: a (128, 256) block plus a (1, 128) bias row do not broadcast.
Expected: the addition line in the kernel body."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def bias_kernel(x_ref, b_ref, o_ref):
    x = x_ref[...]
    b = b_ref[...]
    o_ref[...] = x + b  # EXPECTED LINE


def add_bias(x, b):
    return pl.pallas_call(
        bias_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0)), pl.BlockSpec((1, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
    )(x, b)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32), jax.ShapeDtypeStruct((1, 128), jnp.float32))

"""Tracing error in the kernel body: program_id(1) on a 1-D grid.
Expected: the program_id line in the kernel body."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def offset_kernel(x_ref, o_ref):
    j = pl.program_id(1)  # EXPECTED LINE
    o_ref[...] = x_ref[...] + j.astype(jnp.float32)


def offset(x):
    return pl.pallas_call(
        offset_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32),)

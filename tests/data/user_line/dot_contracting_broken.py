"""Tracing error in the kernel body: the dot contracts 256 with 128 (y's block is transposed).
Expected: PLS1xx at the jnp.dot line (the kernel-body line), the pallas_call related."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def mm_kernel(x_ref, y_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = jnp.dot(x, y_ref[...], preferred_element_type=jnp.float32)  # EXPECTED LINE


def mm(x, y):
    return pl.pallas_call(
        mm_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0)), pl.BlockSpec((128, 256), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32), jax.ShapeDtypeStruct((128, 256), jnp.float32))

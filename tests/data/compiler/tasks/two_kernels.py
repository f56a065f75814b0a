"""One entry, two pallas_calls: the first is fine, the second stores the wrong dtype."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def cast_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def scale_then_cast(x):
    spec = pl.BlockSpec((128, 128), lambda i: (i, 0))
    y = pl.pallas_call(
        scale_kernel,
        grid=(2,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)
    return pl.pallas_call(
        cast_kernel,
        grid=(2,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.bfloat16),
    )(y)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

"""A kernel that closes over an array made outside it (a per-column scale table) instead of taking
it as an input: Pallas cannot capture arrays in a kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scaled(x):
    scale = jnp.linspace(0.5, 1.5, x.shape[1], dtype=x.dtype)  # origin

    def scale_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * scale[None, :]

    spec = pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 128), jnp.float32),)

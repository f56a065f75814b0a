"""A copy kernel whose block breaks the (8, 128) rule: 100 lanes is not a multiple of 128."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    spec = pl.BlockSpec((8, 100), lambda i, j: (i, j))
    return pl.pallas_call(
        copy_kernel,
        grid=(8, 8),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((64, 1024), jnp.float32),
    )(x)

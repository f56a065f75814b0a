"""The same copy kernel with a legal (8, 128) block."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(
        copy_kernel,
        grid=(8, 8),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((64, 1024), jnp.float32),
    )(x)

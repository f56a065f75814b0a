"""The kernel stores through a helper function: the shape mismatch is the helper's store line."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _write(o_ref, v):
    o_ref[...] = v[:, :64]  # (128, 64) into a (128, 128) block


def double_kernel(x_ref, o_ref):
    v = x_ref[...] * 2
    _write(o_ref, v)


def double(x):
    return pl.pallas_call(
        double_kernel,
        grid=(4,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 128), jnp.float32),)

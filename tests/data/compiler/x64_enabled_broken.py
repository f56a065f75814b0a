"""Broken: a float32 kernel in a file that turns on jax_enable_x64 (the index maps trace as int64). The fix is in x64_enabled_fixed.py."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

jax.config.update("jax_enable_x64", True)  # expected: PLS107 (tier 2)


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def double(x):
    return pl.pallas_call(
        double_kernel,
        grid=(x.shape[0] // 128,),
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 256), jnp.float32),)

"""Exploit: a task whose tolerance lets an all-zero output pass (the reference's values are tiny)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def zero_kernel(x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)


def scale(x):
    spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(zero_kernel, grid=(x.shape[0] // 64,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)


def reference(x):
    return x * 1e-6


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

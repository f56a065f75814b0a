"""Fixed version of store_dtype_broken.py (stores float32 into a bfloat16 output ref)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def to_bf16_kernel(x_ref, o_ref):
    acc = x_ref[...].astype(jnp.float32) * 3.0
    o_ref[...] = acc.astype(o_ref.dtype)


def to_bf16(x):
    return pl.pallas_call(
        to_bf16_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.bfloat16),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.bfloat16),)

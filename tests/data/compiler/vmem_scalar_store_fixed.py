"""Fixed version of vmem_scalar_store_broken.py (stores one scalar into a VMEM output ref)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def first_kernel(x_ref, o_ref):
    row = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 0)
    col = jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)
    o_ref[...] = jnp.where((row == 0) & (col == 0), x_ref[0, 0], 0.0)


def first(x):
    return pl.pallas_call(
        first_kernel,
        grid=(1,),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)

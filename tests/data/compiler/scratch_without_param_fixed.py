"""Fixed version of scratch_without_param_broken.py (scratch_shapes has a buffer the kernel does not take)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def rowsum_kernel(x_ref, o_ref, acc_ref):
    acc_ref[...] = jnp.sum(x_ref[...], axis=1, keepdims=True) * jnp.ones((1, 128), jnp.float32)
    o_ref[...] = acc_ref[...]


def rowsum(x):
    return pl.pallas_call(
        rowsum_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((256, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32),)

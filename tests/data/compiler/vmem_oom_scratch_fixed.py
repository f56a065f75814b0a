"""Fixed version of vmem_oom_scratch_broken.py (a 256 MiB VMEM scratch buffer)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def acc_kernel(x_ref, o_ref, acc_ref):
    acc_ref[0:128, :] = x_ref[...]
    o_ref[...] = acc_ref[0:128, :]


def acc(x):
    return pl.pallas_call(
        acc_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((128, 512), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((128, 512), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((128, 512), jnp.float32)],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 512), jnp.float32),)

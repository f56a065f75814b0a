"""The fixed twin of pls013_static_bounds_bad.py: both slices stay inside their blocks."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

HALF = 128


def halves_kernel(x_ref, o_ref, acc_ref):
    left = x_ref[:, 0:HALF]
    right = x_ref[:, HALF:256]
    acc_ref[pl.ds(0, 8), :] = left + right
    o_ref[...] = acc_ref[0:8, :]


def halves(x):
    rows, _ = x.shape
    return pl.pallas_call(
        halves_kernel,
        grid=(rows // 8,),
        in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 128), x.dtype),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 256), jnp.float32),)

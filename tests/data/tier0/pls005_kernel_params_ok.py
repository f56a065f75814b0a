"""PLS005, fixed: the kernel takes one ref per input, per output and per scratch buffer."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def scaled_sum_kernel(x_ref, y_ref, o_ref, acc_ref, *, scale):
    acc_ref[...] = x_ref[...] + y_ref[...]
    o_ref[...] = acc_ref[...] * scale


def scaled_sum(x, y, *, block_rows: int = 64):
    spec = pl.BlockSpec((block_rows, 128), lambda i: (i, 0))
    return pl.pallas_call(
        functools.partial(scaled_sum_kernel, scale=0.5),
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((block_rows, 128), jnp.float32)],
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((256, 128), jnp.float32)
    return (s, s)


def reference(x, y):
    return (x + y) * 0.5

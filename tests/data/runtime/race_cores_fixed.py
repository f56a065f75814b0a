"""The fixed twin of race_cores_broken.py: the accumulating axis is "arbitrary", so one core runs
every step in order."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def col_sum_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.sum(x_ref[...], axis=0, keepdims=True).repeat(8, axis=0)


def col_sum(x):
    return pl.pallas_call(
        col_sum_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((8, x.shape[1]), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)


def reference(x):
    return jnp.broadcast_to(jnp.sum(x, axis=0, keepdims=True), (8, x.shape[1]))


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}

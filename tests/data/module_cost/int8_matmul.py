"""An int8 matmul with int32 accumulation (the int8 MXU rate), blocks of 128 x 256 x 128."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def int8_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.int32)


def int8_matmul(x, y):
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        int8_kernel,
        grid=(m // 128, n // 128),
        in_specs=[pl.BlockSpec((128, k), lambda i, j: (i, 0)), pl.BlockSpec((k, 128), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.int32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 256), jnp.int8), jax.ShapeDtypeStruct((256, 384), jnp.int8))

"""A correct kernel whose "parallel" axis comes last: the TPU compiler accepts this order, the TPU
interpreter refuses it (parallel axes must be a prefix of the grid). Tier 3 says which of the two
spoke (PLS305, a warning), runs with the parallel axis as "arbitrary", and finds nothing else.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def scale(x):
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, j))
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // 8, x.shape[1] // 128),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "parallel")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.float32),)


def reference(x):
    return x * 3.0

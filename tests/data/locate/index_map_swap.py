"""A blocked elementwise kernel whose output index map returns its results in the wrong order
(planted bug, line 26: ``(j, i)`` where ``(i, j)`` was meant): each block lands in its transposed place.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM, BN = 128, 128


def gelu_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = 0.5 * x * (1.0 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def gelu(x):
    m, n = x.shape
    return pl.pallas_call(
        gelu_kernel,
        grid=(m // BM, n // BN),
        in_specs=[pl.BlockSpec((BM, BN), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec(
            (BM, BN),
            lambda i, j: (j, i),
        ),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32),)


def reference(x):
    return 0.5 * x * (1.0 + jnp.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}

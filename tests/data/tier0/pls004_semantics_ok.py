"""PLS004, fixed: one dimension_semantics entry per grid dimension."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def relu_kernel(x_ref, o_ref):
    o_ref[...] = jnp.maximum(x_ref[...], 0.0)


def relu(x, *, bm: int = 128, bn: int = 256):
    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
    return pl.pallas_call(
        relu_kernel,
        grid=(x.shape[0] // bm, x.shape[1] // bn),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 1024), jnp.float32),)


def reference(x):
    return jnp.maximum(x, 0.0)

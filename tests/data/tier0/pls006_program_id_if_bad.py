"""PLS006, broken: a Python `if` on the program_id value (a traced value) to zero the
accumulator on the first reduction step."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def row_sum_kernel(x_ref, o_ref):
    k = pl.program_id(1)
    if k == 0:
        o_ref[...] = jnp.zeros_like(o_ref)
    o_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)


def row_sum(x, *, bm: int = 128, bk: int = 256):
    return pl.pallas_call(
        row_sum_kernel,
        grid=(x.shape[0] // bm, x.shape[1] // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((bm, 1), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0], 1), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 1024), jnp.float32),)


def reference(x):
    return jnp.sum(x, axis=1, keepdims=True)

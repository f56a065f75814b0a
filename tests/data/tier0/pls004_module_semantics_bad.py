"""PLS004, broken: grid and dimension_semantics are module-level tuples of constants; the grid
has two dimensions but SEMANTICS lists one."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

M, N = 1024, 512
BM, BN = 256, 128
GRID = (M // BM, N // BN)
SEMANTICS = ("parallel",)


def neg_kernel(x_ref, o_ref):
    o_ref[...] = -x_ref[...]


def neg(x):
    spec = pl.BlockSpec((BM, BN), lambda i, j: (i, j))
    return pl.pallas_call(
        neg_kernel,
        grid=GRID,
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((M, N), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=SEMANTICS),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((M, N), jnp.float32),)


def reference(x):
    return -x

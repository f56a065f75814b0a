"""PLS018, broken: a tiled matmul accumulating into a VMEM scratch that nothing zeroes: the first
k step adds its product to whatever the buffer held."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    k = pl.program_id(2)
    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _done():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, *, bm=128, bn=128, bk=128):
    m, kk = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn, kk // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32), jax.ShapeDtypeStruct((256, 256), jnp.float32))


def reference(x, y):
    return x @ y

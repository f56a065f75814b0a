"""A matmul whose VMEM accumulator is never zero-initialised.

On a TPU the scratch buffer holds whatever the previous kernel left there. Tier 3 fills fresh
memory with NaN, so the output comes back NaN and the check names the output blocks affected.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    k = pl.program_id(2)
    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, *, bm: int = 128, bn: int = 128, bk: int = 128):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32), jax.ShapeDtypeStruct((256, 256), jnp.float32))


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

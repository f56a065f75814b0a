"""Tiled bf16 matmul whose largest blocks the cost model likes best but the compiler for v5e refuses.

At bm = bn = bk = 1024 the blocks x 2 buffers + the f32 accumulator are exactly 16 MiB, v5e's default
scoped-VMEM limit: the pre-check (blocks x buffers + scratch > limit) lets it through, and libtpu
0.0.42.1 asks 18.35 MiB (its internal scratch and the dot's temporaries) and runs out of VMEM
(E1001). Configurations at least as large (bn = 2048) run out too; smaller ones compile.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] = acc_ref[...] + jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, *, bm: int = 256, bn: int = 256, bk: int = 256):
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((8192, 8192), jnp.bfloat16),
            jax.ShapeDtypeStruct((8192, 8192), jnp.bfloat16))


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


TUNABLES = {"bm": [256, 512, 1024], "bn": [256, 512, 1024], "bk": [256, 512, 1024, 2048]}

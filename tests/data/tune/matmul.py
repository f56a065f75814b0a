"""Tiled matmul with an f32 accumulator: grid (M/bm, N/bn, K/bk), K innermost.

Hand count (tests/test_cost_model.py): x is fetched (M/bm)(N/bn)(K/bk) times (its index (i, k)
changes every step) unless K/bk == 1, y likewise; the output block (i, j) is written back once per
(i, j). FLOPs per step: 2*bm*bn*bk (the dot) + bm*bn (the accumulate).
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, *, bm: int = 256, bn: int = 256, bk: int = 512):
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
    return (jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16),
            jax.ShapeDtypeStruct((2048, 1024), jnp.bfloat16))


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


TOLERANCE = {"atol": 2e-2, "rtol": 2e-2}
TUNABLES = {"bm": [128, 256, 512], "bn": [128, 256, 512], "bk": [256, 512, 1024, 2048]}

"""A hand-tuned-style blocked bf16 GEMM at 4096 x 4096 x 4096 (the upstream TPU matmul's structure:
PrefetchScalarGridSpec, an f32 accumulator in VMEM scratch, K as the last "arbitrary" axis).

Interpreting it at full size is 8 x 8 x 8 = 512 grid steps of 512-wide blocks on CPU: minutes and
gigabytes. Tier 3 must shrink the inputs (block shapes kept, grid shrunk) and say so.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TUNED = {"block_m": 512, "block_n": 512, "block_k": 512}


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=["block_m", "block_n", "block_k"])
def matmul(x, y, *, block_m, block_n, block_k):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec((block_m, block_k), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((block_k, block_n), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((block_m, block_n), lambda i, j, kk: (i, j)),
            grid=(m // block_m, n // block_n, k // block_k),
            scratch_shapes=[pltpu.VMEM((block_m, block_n), jnp.float32)],
        ),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def gemm(x, y):
    return matmul(x, y, **TUNED)


def gemm_inputs():
    return (jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16), jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16))


def gemm_reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


gemm_tolerance = {"atol": 0.5, "rtol": 0.05}

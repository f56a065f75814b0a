"""An 8192^3 bfloat16 blocked matmul (the shape of jax's Pallas matmul guide), as a JAXBench-style task:
the compute-floor test's kernel (its matmul FLOPs at v5e's 197 TFLOP/s take 5.58 ms)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"m": 8192, "k": 8192, "n": 8192}
BM, BK, BN = 512, 1024, 1024


def create_inputs(dtype=jnp.bfloat16):
    kx, ky = jax.random.split(jax.random.key(0))
    return (jax.random.normal(kx, (CONFIG["m"], CONFIG["k"]), dtype),
            jax.random.normal(ky, (CONFIG["k"], CONFIG["n"]), dtype))


def _kernel(x_ref, y_ref, o_ref, acc_ref, *, steps):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == steps - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def workload(x, y):
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        functools.partial(_kernel, steps=k // BK), out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // BM, n // BN, k // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, kk: (i, kk)), pl.BlockSpec((BK, BN), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)

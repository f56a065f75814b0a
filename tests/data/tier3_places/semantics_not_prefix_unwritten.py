"""semantics_not_prefix_jitted.py with one mistake: the output is stored only when the last
reduction step equals num_programs, which never happens. Tier 3 runs with the parallel axes as a
prefix (the interpreter rejects the order written); the rerun with zero-filled memory that tells
an unwritten block from a computed NaN must run that order too, or the finding loses its place
(the guard) and lands at the pallas_call."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2))  # expect: PLS303
    def _done():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


@functools.partial(jax.jit, static_argnames=("bm", "bk", "bn"))
def matmul(x, y, *, bm=8, bk=128, bn=128):
    m, kk = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn, kk // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)), pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary", "parallel")),
    )(x, y)


def workload(x, y):
    return matmul(x, y)


def example_inputs():
    return (jax.random.normal(jax.random.key(0), (16, 256), jnp.float32),
            jax.random.normal(jax.random.key(1), (256, 256), jnp.float32))


def reference(x, y):
    return x @ y


PALLASITE_ENTRY = "workload"

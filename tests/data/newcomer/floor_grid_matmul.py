"""A K-blocked float32 matmul whose block sizes are module-level constants (no TUNABLES: tune tries each
default times 1/4 .. 4) and whose grid floor-divides, as docs/task-convention.md writes it: BN=1024 over
n=512 gives a grid axis of 0 steps, a program that does nothing (issue 59, item 1)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM = 256
BN = 256
BK = 512


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // BM, n // BN, k // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((BK, BN), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 1024), jnp.float32),
            jax.ShapeDtypeStruct((1024, 512), jnp.float32))


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)

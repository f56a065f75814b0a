"""A tiled matmul whose reduction axis (k, the grid's last) is marked "parallel" in a semantics
tuple written one entry per line, away from the pallas_call: on a two-TensorCore chip the core
that starts mid-axis never zeroes its accumulator, and both cores write the same output block.
Tier 3's race detector saw the two cores write that block, and said it at ``out_specs``; the entry
to change is the k axis's "parallel", lines away."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM = BN = BK = 128

SEMANTICS = (
    "parallel",
    "parallel",
    "parallel",  # expect: PLS301
)


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros(acc_ref.shape, jnp.float32)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y):
    m, kk = x.shape
    n = y.shape[1]
    params = pltpu.CompilerParams(dimension_semantics=SEMANTICS)
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // BM, n // BN, kk // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, k: (i, k)),
                  pl.BlockSpec((BK, BN), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=params,
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((128, 512), jnp.float32), jax.ShapeDtypeStruct((512, 128), jnp.float32))


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)

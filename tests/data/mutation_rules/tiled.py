"""A tiled matmul with an accumulator and a paged copy kernel: the fixture of tests/test_mutation_rules.py
(every class of benchmarks/mutation_rules.py has its sites here; the test names them by line)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM = BN = BK = 128


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
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // BM, n // BN, kk // BK),
        in_specs=[
            pl.BlockSpec((BM, BK), lambda i, j, k: (i, k)),
            pl.BlockSpec((BK, BN), lambda i, j, k: (k, j)),
        ],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def gather_kernel(idx_ref, pages_hbm, out_ref, buf, sem):
    i = pl.program_id(0)
    copy = pltpu.make_async_copy(pages_hbm.at[idx_ref[i]], buf, sem)
    copy.start()
    copy.wait()
    helper_store(out_ref, buf)


def helper_store(out_ref, buf):
    out_ref[...] = buf[...]


def gather(idx, pages):
    return pl.pallas_call(
        gather_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(idx.shape[0],),
            in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
            out_specs=pl.BlockSpec((None, 8, 128), lambda i, idx_ref: (i, 0, 0)),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA],
        ),
        out_shape=jax.ShapeDtypeStruct((idx.shape[0], 8, 128), jnp.float32),
    )(idx, pages)


PALLASITE_ENTRY = "matmul"


def example_inputs():
    s = jax.ShapeDtypeStruct((256, 256), jnp.float32)
    return (s, s)

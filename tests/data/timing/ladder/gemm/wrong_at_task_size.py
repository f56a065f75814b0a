"""The blocked matmul with a planted bug that shows only at the task's own size: the last K block is skipped
when the grid has the task's 8 K steps (K = 1024 in blocks of 128); at any reduced K the kernel is right.
The judge checks it at a reduced CONFIG size, so it must run the module it priced at the task's size too."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "ladder_gemm", "M": 512, "K": 1024, "N": 256, "atol": 1e-3, "rtol": 1e-3}
BM, BN, BK = 128, 128, 128
SKIP_LAST_K = True  # planted: at the task's own K (8 blocks of 128) only


def create_inputs(dtype=jnp.bfloat16):
    k1, k2 = jax.random.split(jax.random.key(3))
    return (jax.random.normal(k1, (CONFIG["M"], CONFIG["K"]), dtype),
            jax.random.normal(k2, (CONFIG["K"], CONFIG["N"]), dtype))


def _kernel(a_ref, b_ref, o_ref, acc_ref):
    k, nk = pl.program_id(2), pl.num_programs(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    @pl.when(k < nk - 1 if SKIP_LAST_K and nk == 8 else k < nk)
    def _():
        acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == nk - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def workload(a, b):
    m, k = a.shape
    n = b.shape[1]
    return pl.pallas_call(
        _kernel,
        grid=(m // BM, n // BN, k // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, kk: (i, kk)), pl.BlockSpec((BK, BN), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
    )(a, b)

"""A correct K-blocked float32 Pallas matmul: it differs from jnp.matmul only in the order of the
accumulation over K (four steps of 256)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "matmul_f32", "m": 512, "k": 1024, "n": 512}
BM, BN, BK = 256, 256, 256


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    return (jax.random.normal(kx, (CONFIG["m"], CONFIG["k"]), dtype=dtype),
            jax.random.normal(ky, (CONFIG["k"], CONFIG["n"]), dtype=dtype))


def _kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def workload(x, y):
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        _kernel,
        grid=(m // BM, n // BN, k // BK),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((BK, BN), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)

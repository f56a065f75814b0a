"""Blocked matmul with a float32 VMEM accumulator over the K grid axis. Nothing is wrong here;
bm/bn/bk are tunables (keyword-only ints) that autotuning may vary over TUNABLES.

Run it on CPU (interpret mode) with `python examples/matmul.py`.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, *, bm: int = 256, bn: int = 256, bk: int = 512, interpret: bool = False):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
        interpret=interpret,
    )(x, y)


def example_inputs():
    return (
        jax.ShapeDtypeStruct((512, 1024), jnp.bfloat16),
        jax.ShapeDtypeStruct((1024, 512), jnp.bfloat16),
    )


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32).astype(x.dtype)


TOLERANCE = {"atol": 2e-2, "rtol": 2e-2}
TUNABLES = {"bm": [128, 256, 512], "bn": [128, 256, 512], "bk": [256, 512, 1024]}


if __name__ == "__main__":
    import numpy as np

    args = [jax.random.normal(jax.random.key(i), s.shape, s.dtype) for i, s in enumerate(example_inputs())]
    out = matmul(*args, interpret=True)
    np.testing.assert_allclose(out.astype(np.float32), reference(*args).astype(np.float32), **TOLERANCE)
    print("matmul: interpret-mode result matches the reference")

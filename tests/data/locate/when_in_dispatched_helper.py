"""A tiled matmul whose kernel picks its body by a variable (planted bug, line 26).

The body is named, not called, where the kernel is (``body = _accumulate_step``): the locate step must
follow that name to the helper. Its first-step init is inverted (``!=`` where ``==`` was meant). A second
body the run never takes (``_single_step``) carries a ``pl.when`` of its own that no edit should touch.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref, *, steps):
    body = _single_step if steps == 1 else _accumulate_step
    body(x_ref, y_ref, o_ref, acc_ref)


def _single_step(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _only():
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def _accumulate_step(x_ref, y_ref, o_ref, acc_ref):
    @pl.when(pl.program_id(2) != 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _store():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, *, bm: int = 128, bn: int = 128, bk: int = 128):
    import functools

    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        functools.partial(matmul_kernel, steps=k // bk),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 384), jnp.float32), jax.ShapeDtypeStruct((384, 256), jnp.float32))


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

"""A reduction whose last-step block lost its first statement, the store to ``o_ref`` (a ``pass`` is
left before the store of the second output), in a kernel that picks a multi-step or a single-step
body as jax's flash attention does. Tier 3 said it at the single-step body's store to ``o_ref``,
a function that never ran; the finding belongs at the ``pass``."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _multi_step(x_ref, o_ref, half_ref, acc_ref):
    k = pl.program_id(1)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += x_ref[...]

    @pl.when(k == pl.num_programs(1) - 1)
    def _store():
        pass  # expect: PLS303
        half_ref[...] = acc_ref[...] * 0.5


def _single_step(x_ref, o_ref, half_ref, acc_ref):
    o_ref[...] = x_ref[...]
    half_ref[...] = x_ref[...] * 0.5


def sum_kernel(*refs, steps):
    if steps > 1:
        body = _multi_step
    else:
        body = _single_step
    body(*refs)


def row_sums(x):
    m, n = x.shape
    return pl.pallas_call(
        functools.partial(sum_kernel, steps=n // 128),
        grid=(m // 8, n // 128),
        in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
        out_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, 0)), pl.BlockSpec((8, 128), lambda i, k: (i, 0))],
        out_shape=[jax.ShapeDtypeStruct((m, 128), x.dtype), jax.ShapeDtypeStruct((m, 128), x.dtype)],
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 512), jnp.float32),)


def reference(x):
    sums = x.reshape(x.shape[0], -1, 128).sum(axis=1)
    return [sums, sums * 0.5]

"""A grouped-matmul-style kernel whose store helper computes the value to store and no longer stores
it (the store was deleted, leaving ``to_store`` unused). The only store of the output left is the
copy of an existing output, under ``if existing_ref is not None``: this task passes none, so that
code is never traced. Issue 50: tier 3 said it at that other store (as a Megablox GMM mutant was
said 19 lines off); the store belongs right after ``to_store``."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def _kernel(x_ref, y_ref, existing_ref, o_ref, acc_ref, *, nk):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)
        if existing_ref is not None:
            o_ref[...] = existing_ref[...]

    def _store_accum():
        scale = jnp.ones(acc_ref.shape, jnp.float32)
        to_store = acc_ref[...] * scale  # expect: PLS303

    def _accum(last):
        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
        if last:
            _store_accum()

    jax.lax.cond(k == nk - 1, functools.partial(_accum, True), functools.partial(_accum, False))


def matmul(x, y):
    m, kk = x.shape
    n = y.shape[1]
    nk = kk // 128
    return pl.pallas_call(
        functools.partial(_kernel, nk=nk),
        grid=(m // 128, n // 128, nk),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                  pl.BlockSpec((128, 128), lambda i, j, k: (k, j)), None],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y, None)


def example_inputs():
    return (jax.ShapeDtypeStruct((128, 256), jnp.float32), jax.ShapeDtypeStruct((256, 256), jnp.float32))


def reference(x, y):
    return x @ y

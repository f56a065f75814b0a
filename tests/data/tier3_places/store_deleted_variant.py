"""A kernel that forwards ``*args`` to one of two variants picked by a local name, as jax's flash
attention does: the tiled variant's last-step block lost its first statement, the output's store,
and still stores the row sums. The single-step variant (run only when one block covers the
reduction) stores the output, but it never ran here. Issue 50: tier 3 said it at that other
variant's store; the store belongs first in the tiled variant's last-step block."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BM = BN = BK = 128


def _kernel(x_ref, *args, **kwargs):
    if kwargs["nk"] == 1:
        kernel = _single_step
    else:
        kernel = _tiled
    kernel(x_ref, *args, **kwargs)


def _single_step(x_ref, y_ref, o_ref, s_ref, acc_ref, *, nk):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)
    s_ref[...] = jnp.sum(o_ref[...], axis=1, keepdims=True) * jnp.ones(s_ref.shape, s_ref.dtype)


def _tiled(x_ref, y_ref, o_ref, s_ref, acc_ref, *, nk):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == nk - 1)
    def _store():
        s_ref[...] = jnp.sum(acc_ref[...], axis=1, keepdims=True) * jnp.ones(s_ref.shape, s_ref.dtype)  # expect: PLS303


def matmul(x, y):
    m, kk = x.shape
    n = y.shape[1]
    nk = kk // BK
    out, _ = pl.pallas_call(
        functools.partial(_kernel, nk=nk),
        grid=(m // BM, n // BN, nk),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, k: (i, k)),
                  pl.BlockSpec((BK, BN), lambda i, j, k: (k, j))],
        out_specs=[pl.BlockSpec((BM, BN), lambda i, j, k: (i, j)), pl.BlockSpec((BM, BN), lambda i, j, k: (i, j))],
        out_shape=[jax.ShapeDtypeStruct((m, n), x.dtype), jax.ShapeDtypeStruct((m, n), jnp.float32)],
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)
    return out


def example_inputs():
    return (jax.ShapeDtypeStruct((128, 256), jnp.float32), jax.ShapeDtypeStruct((256, 128), jnp.float32))


def reference(x, y):
    return x @ y

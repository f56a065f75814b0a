"""A kernel that forwards ``*args`` to one of two variants chosen by a local name (``kernel = ...``
on the two branches of an ``if``), as JAXBench's flash attention does. The tiled variant's
first-step block resets the running max but not the accumulator. Tier 3 found the NaN but could
not follow the local name into the variant, so it said it at ``scratch_shapes``."""

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
    kernel((0,), x_ref, *args, **kwargs)


def _single_step(idx, x_ref, y_ref, o_ref, acc_ref, max_ref, *, nk):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def _tiled(idx, x_ref, y_ref, o_ref, acc_ref, max_ref, *, nk):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        max_ref[...] = jnp.full(max_ref.shape, -jnp.inf, jnp.float32)  # expect: PLS303

    prod = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    acc_ref[...] += prod
    max_ref[...] = jnp.maximum(max_ref[...], prod)

    @pl.when(k == nk - 1)
    def _store():
        o_ref[...] = (acc_ref[...] + 0.0 * max_ref[...]).astype(o_ref.dtype)


def matmul(x, y):
    m, kk = x.shape
    n = y.shape[1]
    nk = kk // BK
    return pl.pallas_call(
        functools.partial(_kernel, nk=nk),
        grid=(m // BM, n // BN, nk),
        in_specs=[pl.BlockSpec((BM, BK), lambda i, j, k: (i, k)),
                  pl.BlockSpec((BK, BN), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        scratch_shapes=[pltpu.VMEM((BM, BN), jnp.float32), pltpu.VMEM((BM, BN), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((128, 256), jnp.float32), jax.ShapeDtypeStruct((256, 128), jnp.float32))


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)

"""Three Pallas TPU kernels in one file (the long task form), for the worker benchmark."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, *, block_rows: int = 256):
    spec = pl.BlockSpec((block_rows, 512), lambda i: (i, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def add_inputs():
    s = jax.ShapeDtypeStruct((2048, 512), jnp.float32)
    return (s, s)


def row_softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def row_softmax(x, *, block_rows: int = 64):
    spec = pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        row_softmax_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def row_softmax_inputs():
    return (jax.ShapeDtypeStruct((512, 1024), jnp.float32),)


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref, *, k_steps: int):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(pl.program_id(2) == k_steps - 1)
    def _():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y, *, bm: int = 256, bn: int = 256, bk: int = 512):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        functools.partial(matmul_kernel, k_steps=k // bk),
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


def matmul_inputs():
    return (jax.ShapeDtypeStruct((1024, 2048), jnp.bfloat16), jax.ShapeDtypeStruct((2048, 1024), jnp.bfloat16))

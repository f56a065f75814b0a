"""A row-max scaling kernel called twice by its task: without the scratch row max, then with it. The
scratch's rows are half the block's (planted: line 31, ``bm // 2``): only the second call fails, storing a
(128, 1) row max into a (64, 1) buffer; the finding belongs at that dim, read from the call that failed."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def scale_kernel(x_ref, o_ref, *scratch, with_max):
    if with_max:
        (max_ref,) = scratch
        max_ref[...] = jnp.max(jnp.abs(x_ref[...]), axis=1, keepdims=True)
        o_ref[...] = x_ref[...] / max_ref[...]
    else:
        o_ref[...] = x_ref[...] * 2.0


def scale(x, with_max, bm=128):
    rows, cols = x.shape
    return pl.pallas_call(
        functools.partial(scale_kernel, with_max=with_max),
        grid=(rows // bm,),
        in_specs=[pl.BlockSpec((bm, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((bm, cols), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[
            pltpu.VMEM((bm // 2, 1), jnp.float32) if with_max else None,
        ],
    )(x)


def both(x):
    return scale(x, False) + scale(x, True)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)

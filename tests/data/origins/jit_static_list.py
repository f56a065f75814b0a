"""Block sizes from a TUNED_PARAMS list entry, handed to a jitted function as a static argument
(``tuple(...)`` around it) and unpacked inside."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TUNED_PARAMS = {
    "block_shape": [128, 256],  # origin
    "block_k": 512,
}


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


@functools.partial(jax.jit, static_argnames=("block_shape",))
def scale(x, block_shape):
    rows, cols = x.shape
    bm, bn = block_shape
    return pl.pallas_call(
        scale_kernel,
        grid=(rows // bm, cols // bn),
        in_specs=[pl.BlockSpec((bm, bn), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def workload(x):
    return scale(x, block_shape=tuple(TUNED_PARAMS["block_shape"]))


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 512), jnp.float32),)


PALLASITE_ENTRY = "workload"

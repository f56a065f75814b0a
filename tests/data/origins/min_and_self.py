"""Block sizes that reach the BlockSpec through ``min(block, dim)`` (a tuned size clipped to the
array) and through ``self`` (a size an object's constructor stored). Each ``# origin: tag`` line
is where the value was written."""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


@dataclasses.dataclass(frozen=True)
class Blocks:
    block_q: int = 128
    block_k: int = 128


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _clipped(x, blocks):
    bq = min(blocks.block_q, x.shape[0])
    return pl.pallas_call(
        copy_kernel,
        grid=(x.shape[0] // bq,),
        in_specs=[pl.BlockSpec((bq, x.shape[1]), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((bq, x.shape[1]), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


class Copier:
    def __init__(self, block_rows=8, block_cols=256):  # origin: default
        self.block_rows = block_rows
        self.block_cols = block_cols

    def __call__(self, x):
        br, bc = self.block_rows, self.block_cols
        return pl.pallas_call(
            copy_kernel,
            grid=(x.shape[0] // br, x.shape[1] // bc),
            in_specs=[pl.BlockSpec((br, bc), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((br, bc), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        )(x)


def clipped(x):
    return _clipped(x, Blocks(block_q=60))  # origin: clipped


def copied(x):
    return Copier(block_cols=512)(x)  # origin: argument


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 512), jnp.float32),)


PALLASITE_ENTRY = "clipped"

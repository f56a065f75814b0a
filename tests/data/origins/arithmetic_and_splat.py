"""Block sizes through arithmetic (``2 * base``), a ``**dict`` splat into a config dataclass, a
classmethod returning the default config, and a helper function returning a pair."""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

SIZES = {"rows": 24, "cols": 128}  # origin: rows


@dataclasses.dataclass(frozen=True)
class Blocks:
    rows: int
    cols: int

    @classmethod
    def default(cls):
        return Blocks(rows=16, cols=256)  # origin: default


def pick_pair():
    return 40, 512  # origin: pair


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x, blocks):
    base = blocks.rows
    rows = 2 * base
    spec = pl.BlockSpec((rows, blocks.cols), lambda i: (i, 0))
    return pl.pallas_call(
        copy_kernel, grid=(x.shape[0] // rows,), in_specs=[spec], out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def copy_default(x):
    blocks = Blocks.default()
    spec = pl.BlockSpec((blocks.rows, blocks.cols), lambda i: (i, 0))
    return pl.pallas_call(
        copy_kernel, grid=(x.shape[0] // blocks.rows,), in_specs=[spec], out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def copy_pair(x):
    bm, bn = pick_pair()
    spec = pl.BlockSpec((bm, bn), lambda i: (i, 0))
    return pl.pallas_call(
        copy_kernel, grid=(x.shape[0] // bm,), in_specs=[spec], out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def entry(x):
    return copy(x, Blocks(**SIZES)) + copy_default(x) + copy_pair(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((480, 512), jnp.float32),)


PALLASITE_ENTRY = "entry"

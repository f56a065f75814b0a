"""A 100-lane block (the mistake: not a multiple of 128) chosen by a helper that asks for a plain int.
Run as written, the helper returns the 100; a run whose numbers were not plain ints would take the
other branch and build a (8, 128) block from the 128 below. That run is not the checked one: where
the 100 was written must not be read off it."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_COLS = 100


def cols():
    return BLOCK_COLS if type(BLOCK_COLS) is int else 128  # not the place: this 128 never ran


def add_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def add(x):
    spec = pl.BlockSpec((8, cols()), lambda i: (0, i))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[1] // 128,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 512), jnp.float32),)

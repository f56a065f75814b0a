"""A kernel whose block shape depends on what its numbers are, not only on their values: the exact
type of a block size and of a float scale, ``isinstance`` dispatch on a config value, the ``repr`` of
a size, the identity of two equal small ints and ``x.__class__``. Run as written, every question
answers as plain Python does and the block is (8, 128); if any answered otherwise (a checker that
changed the program), the block would be (8, 100), which the TPU lowering rejects, or the file
would raise."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8
LANES = 128
SCALE = 3.0
HALF = 64


@functools.singledispatch
def lanes_for(value):
    return 100  # a type the kernel does not know: a block the lowering rejects


@lanes_for.register(int)
def _(value):
    return value if type(value) is int else 100


def block_shape():
    if type(ROWS) is not int or ROWS.__class__ is not int or type(SCALE) is not float or type(3.0) is not float:
        raise TypeError(f"block sizes must be plain numbers, got {type(ROWS).__name__} and {type(SCALE).__name__}")
    if repr(LANES) != "128" or f"{LANES!r}" != "128":
        raise ValueError("repr changed")
    if not (HALF * 2 is LANES):  # noqa: F632 - CPython keeps one object for each small int
        return ROWS, 100
    if not isinstance(SCALE, float) or isinstance(SCALE, int):
        return ROWS, 100
    return ROWS, lanes_for(LANES)


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * SCALE


def scale(x):
    rows, lanes = block_shape()
    spec = pl.BlockSpec((rows, lanes), lambda i, j: (i, j))
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // rows, x.shape[1] // lanes),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.float32),)


def reference(x):
    return x * 3.0

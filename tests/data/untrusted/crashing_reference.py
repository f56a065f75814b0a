"""A user's file whose reference crashes the process that runs it (a read of address 0: SIGSEGV) at the judge's
second size: a stand-in for a program that crashes the judge after the candidate's process is gone
(tests/test_candidate_isolation.py); the judge runs the reference at that size only there, beside the candidate's
exported program."""

import ctypes

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    spec = pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs(rows: int = 256, cols: int = 128):
    return (jax.ShapeDtypeStruct((rows, cols), jnp.float32), jax.ShapeDtypeStruct((rows, cols), jnp.float32))


def reference(x, y):
    if x.shape[0] != 256:  # the second size: only ever traced after the candidate's process is gone
        ctypes.string_at(0)
    return x + y

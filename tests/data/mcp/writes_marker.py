"""A row-blocked Pallas add whose import writes `imported.marker` beside itself (tests/test_mcp.py).

In a folder the user has not trusted, `pallasite mcp` must never run it (tier 0 reads it; nothing imports
it); in a trusted folder tier 1 imports it, and the marker appears.
"""
import pathlib

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

pathlib.Path(__file__).with_name("imported.marker").write_text("the kernel's module ran\n")


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
    return x + y

"""A candidate with no kernel at all: XLA's own add (the judge's honest verdict: no_pallas_call)."""

import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "add"


def add(x, y):
    return x + y


def example_inputs(rows: int = 256, cols: int = 128):
    return (jax.ShapeDtypeStruct((rows, cols), jnp.float32), jax.ShapeDtypeStruct((rows, cols), jnp.float32))


def reference(x, y):
    return x + y

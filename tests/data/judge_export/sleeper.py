"""A sleeper: right for its first three calls of each instance (the checks), then a cheap wrong answer
(the timed calls): a judge that times what the candidate's Python runs when timed times the wrong one."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CALLS = [0]


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    CALLS[0] += 1
    if CALLS[0] > 3:
        return x
    spec = pl.BlockSpec((128, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // 128,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs(rows: int = 256, cols: int = 128):
    return (jax.ShapeDtypeStruct((rows, cols), jnp.float32), jax.ShapeDtypeStruct((rows, cols), jnp.float32))


def reference(x, y):
    return x + y

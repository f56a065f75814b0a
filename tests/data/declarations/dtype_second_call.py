"""A task of two pallas_calls, the second's output declared int32 where the reference returns floats (planted:
line 28, ``jnp.int32`` where ``x.dtype`` was meant). The kernel casts to its output's dtype, so nothing fails
before tier 3, which sees the task's second output of the wrong dtype: said at that call's out_shape, not the
first call's."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = (x_ref[...] + y_ref[...]).astype(o_ref.dtype)


def two_steps(x):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    grid = (x.shape[0] // 8,)
    doubled = pl.pallas_call(
        double_kernel, grid=grid, in_specs=[spec], out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)
    summed = pl.pallas_call(
        add_kernel, grid=grid, in_specs=[spec, spec], out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32),
    )(x, doubled)
    return doubled, summed


def reference(x):
    return x * 2.0, x * 3.0


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)

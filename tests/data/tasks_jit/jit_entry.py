"""A native-convention task whose entry is wrapped by functools.partial(jax.jit, ...)."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


@functools.partial(jax.jit, static_argnames=("block_rows",))
def double(x, *, block_rows: int = 64):
    spec = pl.BlockSpec((block_rows, 256), lambda i: (i, 0))
    return pl.pallas_call(
        double_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 256), jnp.float32),)


def reference(x):
    return x * 2.0

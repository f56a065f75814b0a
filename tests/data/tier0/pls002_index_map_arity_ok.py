"""PLS002, fixed: one index_map parameter per grid dimension."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def scale(x, *, block_rows: int = 128):
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((1024, 256), jnp.float32),)


def reference(x):
    return x * 2.0

"""PLS003, broken: the block is 2-D but the output index_map returns a single index."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + x_ref[...]


def double(x, *, block_rows: int = 128):
    return pl.pallas_call(
        double_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[pl.BlockSpec((block_rows, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((block_rows, 256), lambda i: (i,)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 256), jnp.float32),)


def reference(x):
    return x + x

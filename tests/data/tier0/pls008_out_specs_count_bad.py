"""PLS008, broken: two out_specs for a single output in out_shape."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def square_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * x_ref[...]


def square(x, *, block_rows: int = 128):
    spec = pl.BlockSpec((block_rows, 128), lambda i: (i, 0))
    return pl.pallas_call(
        square_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec],
        out_specs=[spec, spec],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype)],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)


def reference(x):
    return [x * x]

"""PLS012, fixed: floor division keeps the grid an int."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 128


def inc_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def inc(x):
    spec = pl.BlockSpec((BLOCK, 128), lambda i: (i, 0))
    return pl.pallas_call(
        inc_kernel,
        grid=(x.shape[0] // BLOCK,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((1024, 128), jnp.float32),)


def reference(x):
    return x + 1.0

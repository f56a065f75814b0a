"""PLS009, broken: the kernel returns its result instead of writing it to the output ref."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def exp_kernel(x_ref, o_ref):
    return jnp.exp(x_ref[...])


def exp(x, *, block_rows: int = 64):
    spec = pl.BlockSpec((block_rows, 256), lambda i: (i, 0))
    return pl.pallas_call(
        exp_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.float32),)


def reference(x):
    return jnp.exp(x)

"""A kernel that sums the four 8-row slices of its block in a loop, but the window starts one
slice late: the last read goes past the block. The finding belongs at the read."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def slices_kernel(x_ref, o_ref):
    def body(i, acc):
        start = pl.multiple_of(i * 8, 8)
        return acc + x_ref[pl.ds(start + 8, 8), :]  # expect: PLS302

    o_ref[...] = jax.lax.fori_loop(0, 4, body, jnp.zeros((8, 128), jnp.float32))


def slices(x):
    return pl.pallas_call(
        slices_kernel,
        grid=(x.shape[0] // 32,),
        in_specs=[pl.BlockSpec((32, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0] // 4, 128), jnp.float32),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 128), jnp.float32),)

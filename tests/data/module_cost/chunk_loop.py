"""A static ``fori_loop`` inside a kernel (lowered to an ``scf.for`` with constant bounds): each
grid step walks its block in 4 row chunks, exp and a running sum per chunk."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CHUNK = 32


def chunk_kernel(x_ref, o_ref):
    def body(c, acc):
        rows = x_ref[pl.ds(c * CHUNK, CHUNK), :]
        return acc + jnp.exp(rows)

    o_ref[...] = jax.lax.fori_loop(0, x_ref.shape[0] // CHUNK, body, jnp.zeros((CHUNK, 256), jnp.float32))


def chunk_sums(x):
    steps = x.shape[0] // (4 * CHUNK)
    return pl.pallas_call(
        chunk_kernel,
        grid=(steps,),
        in_specs=[pl.BlockSpec((4 * CHUNK, 256), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((CHUNK, 256), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((steps * CHUNK, 256), jnp.float32),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((1024, 256), jnp.float32),)

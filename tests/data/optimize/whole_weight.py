"""A row-blocked Pallas matmul whose weight is one whole block (576 MiB): the rows of x shrink for
interpret mode, the weight cannot, so even the reduced inputs are too large to run."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 256


def matmul_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], w_ref[...])


def matmul(x, w):
    return pl.pallas_call(
        matmul_kernel,
        grid=(x.shape[0] // ROWS,),
        in_specs=[pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0)), pl.BlockSpec(w.shape, lambda i: (0, 0))],
        out_specs=pl.BlockSpec((ROWS, w.shape[1]), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((x.shape[0], w.shape[1]), x.dtype),
    )(x, w)


def example_inputs():
    return (jax.ShapeDtypeStruct((32768, 12288), jnp.float32), jax.ShapeDtypeStruct((12288, 12288), jnp.float32))


def reference(x, w):
    return x @ w

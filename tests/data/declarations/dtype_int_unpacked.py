"""A matmul whose output is declared int32 (planted: line 21, ``jnp.int32``) while it computes and stores its
inputs' float32; its operands are passed unpacked (``(*operands)``), as ragged paged attention passes them.
jax's trace fails at the store, far from the declaration."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def mm_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(x_ref.dtype)


def mm(x, y, bm=128):
    m, k = x.shape
    n = y.shape[1]
    operands = (x, y)
    return pl.pallas_call(
        mm_kernel,
        grid=(m // bm,),
        out_shape=jax.ShapeDtypeStruct(shape=(m, n), dtype=jnp.int32),
        in_specs=[pl.BlockSpec((bm, k), lambda i: (i, 0)), pl.BlockSpec((k, n), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((bm, n), lambda i: (i, 0)),
    )(*operands)


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32), jax.ShapeDtypeStruct((128, 128), jnp.float32))

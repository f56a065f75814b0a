"""One block spec used for the input and the output (as ragged paged attention does with its queries), four
lanes short (planted: line 19, ``d - 4``): the kernel flattens its heads against the full head size, and
jax's trace fails at that reshape, far from the spec."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def flat_kernel(q_ref, o_ref, *, heads, head_dim):
    rows = q_ref.shape[0]
    q = q_ref[...].reshape(rows * heads, head_dim)
    o_ref[...] = (q * 2.0).reshape(o_ref.shape)


def double_heads(q, bq=16):
    n, heads, d = q.shape
    spec = pl.BlockSpec(
        (bq, heads, d - 4),
        lambda i: (i, 0, 0),
    )
    kernel = lambda q_ref, o_ref: flat_kernel(q_ref, o_ref, heads=heads, head_dim=d)
    return pl.pallas_call(kernel, grid=(n // bq,), in_specs=[spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype))(q)


def reference(q):
    return q * 2.0


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 4, 128), jnp.float32),)

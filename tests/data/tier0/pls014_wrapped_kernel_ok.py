"""The twin of pls014_wrapped_kernel_bad.py with the matmul written here: tier 0 reads its site."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def matmul(x, y):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // 256, n // 256),
        in_specs=[pl.BlockSpec((256, k), lambda i, j: (i, 0)), pl.BlockSpec((k, 256), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((256, 256), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((512, 512), jnp.bfloat16)
    return (s, s)

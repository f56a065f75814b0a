"""A matmul whose contraction dimension is never tiled: each grid step holds a (128, K) row block of
x and the whole (K, 256) of y, K = 32768, which overflows the scoped VMEM. The row block (128) is
not the mistake; the BlockSpecs that keep K whole are."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_M = 128
BLOCK_N = 256


def matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def matmul(x, y):
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // BLOCK_M, n // BLOCK_N),
        in_specs=[
            pl.BlockSpec((BLOCK_M, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, BLOCK_N), lambda i, j: (0, j)),  # origin
        ],
        out_specs=pl.BlockSpec((BLOCK_M, BLOCK_N), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 32768), jnp.bfloat16), jax.ShapeDtypeStruct((32768, 512), jnp.bfloat16))

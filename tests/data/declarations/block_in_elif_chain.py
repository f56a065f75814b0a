"""A matmul whose right-hand block is chosen in an if/elif chain (megablox's ``rhs_block_spec``, paged attention's
``q_block_spec``), the arm the task takes declaring a dim off (planted: line 26, ``bk - 4`` where ``bk`` was
meant). The kernel's dot fails first; which arm ran only the trace knows, and the value's places it recorded
say it: one of them lies in this function."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BM, BK, BN = 128, 128, 128


def matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def matmul(x, y, layout="plain"):
    m, k = x.shape
    n = y.shape[1]
    bm, bk, bn = BM, BK, BN
    if layout == "stacked":
        y_spec = pl.BlockSpec((None, bk, bn), lambda i, j: (0, 0, j))
    elif layout == "transposed":
        y_spec = pl.BlockSpec((bn, bk), lambda i, j: (j, 0))
    else:
        y_spec = pl.BlockSpec((bk - 4, bn), lambda i, j: (0, j))
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn),
        in_specs=[pl.BlockSpec((bm, k), lambda i, j: (i, 0)), y_spec],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
    )(x, y)


def reference(x, y):
    return x @ y


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32), jax.ShapeDtypeStruct((128, 256), jnp.float32))

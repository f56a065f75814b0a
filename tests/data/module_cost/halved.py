"""Two matmul kernels with the same operands, grid and blocks: ``full`` contracts the whole K block,
``half`` only its first half (half the MXU work). A module whose TPU custom call carries ``half``'s
Mosaic body while its CPU branch is ``full``'s interpreter loop is a hand edit the judge catches by running
the TPU program (tests/test_module_cost.py splices one into the other)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BM, BN, K = 128, 128, 256


def full_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def half_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[:, : K // 2], y_ref[: K // 2, :], preferred_element_type=jnp.float32)


def _call(kernel, x, y):
    m, n = x.shape[0], y.shape[1]
    return pl.pallas_call(
        kernel, grid=(m // BM, n // BN),
        in_specs=[pl.BlockSpec((BM, K), lambda i, j: (i, 0)), pl.BlockSpec((K, BN), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
    )(x, y)


def full(x, y):
    return _call(full_kernel, x, y)


def half(x, y):
    return _call(half_kernel, x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, K), jnp.bfloat16), jax.ShapeDtypeStruct((K, 256), jnp.bfloat16))

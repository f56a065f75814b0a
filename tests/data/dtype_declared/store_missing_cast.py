"""A bfloat16 matmul accumulating in a float32 scratch whose final store lost its cast: the output is
declared bfloat16 like the inputs, the value stored is float32. The store is the place (it needs
``.astype(o_ref.dtype)``), with the declaration related."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _done():
        o_ref[...] = acc_ref[...]  # expect: PLS104


def matmul(x, y):
    m, kk = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // 128, n // 128, kk // 128),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)), pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
        scratch_shapes=[pltpu.VMEM((128, 128), jnp.float32)],
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((128, 256), jnp.bfloat16), jax.ShapeDtypeStruct((256, 128), jnp.bfloat16))

"""A row-sum kernel whose final store sits under a pl.when that is never true (the last step is
``nk - 1``, not ``nk``): no block of the output is ever written. The finding belongs at the guard."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def rowsum_kernel(x_ref, o_ref, acc_ref):
    k = pl.program_id(1)
    nk = pl.num_programs(1)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True) * jnp.ones((1, 128), jnp.float32)

    @pl.when(k == nk)  # expect: PLS303
    def _write():
        o_ref[...] = acc_ref[...]


def rowsum(x):
    rows, cols = x.shape
    return pl.pallas_call(
        rowsum_kernel,
        grid=(rows // 8, cols // 128),
        in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.float32),)


def reference(x):
    return jnp.sum(x, axis=1, keepdims=True) * jnp.ones((1, 128), jnp.float32)

"""A float32 row-sum kernel whose accumulator scratch is declared bfloat16: the kernel computes
float32 (its inputs are float32) and the store into the scratch is rejected. The scratch_shapes
entry is the place; the store is related."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def rowsum_kernel(x_ref, o_ref, acc_ref):
    k = pl.program_id(1)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros((8, 128), jnp.float32)

    acc_ref[...] = acc_ref[...] + x_ref[...]

    @pl.when(k == pl.num_programs(1) - 1)
    def _done():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def rowsum(x):
    rows, cols = x.shape
    return pl.pallas_call(
        rowsum_kernel,
        grid=(rows // 8, cols // 128),
        in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.bfloat16)],  # expect: PLS104
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.float32),)

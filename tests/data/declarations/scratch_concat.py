"""A kernel that concatenates its running row statistics with a block of rows, along the lanes: the scratch
holds half the block's rows (planted: line 27, ``bm // 2``), so jax's concatenate fails in the kernel with
two shapes ("Cannot concatenate arrays with shapes that differ in dimensions other than the one being
concatenated"); the finding belongs at that scratch dim."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def stats_kernel(x_ref, o_ref, stats_ref):
    stats_ref[...] = jnp.zeros_like(stats_ref)
    o_ref[...] = jnp.concatenate([x_ref[...], stats_ref[...]], axis=1)


def with_stats(x, bm=16):
    rows, cols = x.shape
    return pl.pallas_call(
        stats_kernel,
        grid=(rows // bm,),
        in_specs=[pl.BlockSpec((bm, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((bm, cols + 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, cols + 128), x.dtype),
        scratch_shapes=[
            pltpu.VMEM(
                (bm // 2, 128), jnp.float32),
        ],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 128), jnp.float32),)

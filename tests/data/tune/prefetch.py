"""Block gather with scalar prefetch: out block i = 2 * x block ids[i].

Hand count with ids = [3, 3, 1, 1, 1, 0, 3, 3]: x's block index changes 4 times along the grid
(3, 1, 0, 3), so 4 fetches of a (BLOCK_ROWS, 256) f32 block; 8 output blocks; 1 multiply per
element per step.
"""
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_ROWS = 16


def gather_kernel(ids_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def gather(ids, x):
    n = ids.shape[0]
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(n,),
        in_specs=[pl.BlockSpec((BLOCK_ROWS, 256), lambda i, ids: (ids[i], 0))],
        out_specs=pl.BlockSpec((BLOCK_ROWS, 256), lambda i, ids: (i, 0)),
    )
    return pl.pallas_call(gather_kernel, grid_spec=grid_spec,
                          out_shape=jax.ShapeDtypeStruct((n * BLOCK_ROWS, 256), x.dtype))(ids, x)


def example_inputs():
    ids = np.array([3, 3, 1, 1, 1, 0, 3, 3], dtype=np.int32)
    return (ids, jax.ShapeDtypeStruct((4 * BLOCK_ROWS, 256), jnp.float32))

"""A scalar-prefetch index map that names a block one past the end (line 22): said at the pallas_call before
(its BlockSpecs sit in the grid spec); now at the index map."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def gather_kernel(idx_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...]


def gather_rows(idx, x):
    n, d = x.shape
    return pl.pallas_call(
        gather_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(idx.shape[0],),
            in_specs=[pl.BlockSpec((128, d), lambda i, idx_ref: (idx_ref[i] + 1, 0))],
            out_specs=pl.BlockSpec((128, d), lambda i, idx_ref: (i, 0)),
        ),
        out_shape=jax.ShapeDtypeStruct((idx.shape[0] * 128, d), x.dtype),
    )(idx, x)


def example_inputs():
    return (jnp.array([0, 1, 2, 3], jnp.int32), jax.ShapeDtypeStruct((512, 128), jnp.float32))


def reference(idx, x):
    return jnp.concatenate([x[i * 128:(i + 1) * 128] for i in [1, 2, 3, 4]])

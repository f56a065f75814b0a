"""A kernel whose grid size is a traced value: the number of row blocks to process is computed from
an integer input (``counts``), as ragged/grouped kernels size their grids from scalar-prefetch data."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

ROWS = 128


def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def scale_active(x, counts):
    active = (jnp.sum(counts) + ROWS - 1) // ROWS  # blocks that hold any row
    return pl.pallas_call(
        kernel,
        grid=(active,),
        in_specs=[pl.BlockSpec((ROWS, 512), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((ROWS, 512), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((1024, 512), jnp.float32), jax.ShapeDtypeStruct((4,), jnp.int32))


def inputs():
    return (jnp.ones((1024, 512), jnp.float32), jnp.asarray(np.array([100, 100, 100, 84], np.int32)))


def reference(x, counts):
    return x * 2.0

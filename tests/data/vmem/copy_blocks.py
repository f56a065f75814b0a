"""A copy kernel whose (ROWS, 1024) float32 blocks are sized by a module constant: 2 blocks x 2
buffers x ROWS x 4 KiB of VMEM. tests/test_tier0_vmem.py sets ROWS around the chip's scoped-VMEM
limit to pin tier 0's VMEM rule (PLS015) to what the TPU compiler does."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 256


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    spec = pl.BlockSpec((ROWS, 1024), lambda i: (i, 0))
    return pl.pallas_call(
        copy_kernel,
        grid=(x.shape[0] // ROWS,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((2 * ROWS, 1024), jnp.float32),)

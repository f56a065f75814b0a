"""A kernel that keeps each batch row in a scratch buffer sized ``block_b // 2`` rows (planted: line 26):
with one row per block that is 0, so every access of the scratch is past its end. jax's trace accepts it
(the row index is dynamic); tier 3's interpreter finds the store out of bounds in the kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def scale_kernel(x_ref, o_ref, rows_ref):
    b = pl.program_id(0) % 1
    rows_ref[b] = x_ref[0] * 2.0
    o_ref[0] = rows_ref[b].astype(o_ref.dtype)


def scale(x, block_b=1):
    n, r, c = x.shape
    spec = pl.BlockSpec((block_b, r, c), lambda i: (i, 0, 0))
    return pl.pallas_call(
        scale_kernel,
        grid=(n // block_b,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((block_b // 2, r, c), jnp.float32)],
    )(x)


def reference(x):
    return x * 2.0


def example_inputs():
    return (jax.ShapeDtypeStruct((4, 8, 128), jnp.float32),)

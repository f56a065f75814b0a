"""A kernel that alternates two scratch slots, one per grid step (``pl.program_id(0) % 2``), with the scratch
declared one slot deep (planted: line 26, ``1`` where ``2`` was meant): the second step stores past its end.
jax's trace accepts it (the slot is dynamic); tier 3's interpreter finds the store out of bounds."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def scale_kernel(x_ref, o_ref, slots_ref):
    slot = pl.program_id(0) % 2
    slots_ref[slot] = x_ref[...] * 2.0
    o_ref[...] = slots_ref[slot].astype(o_ref.dtype)


def scale(x):
    n, r, c = x.shape
    spec = pl.BlockSpec((None, r, c), lambda i: (i, 0, 0))
    return pl.pallas_call(
        scale_kernel,
        grid=(n,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((1, r, c), jnp.float32)],
    )(x)


def reference(x):
    return x * 2.0


def example_inputs():
    return (jax.ShapeDtypeStruct((4, 8, 128), jnp.float32),)

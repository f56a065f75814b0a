"""Two scratch buffers declared by one ``VMEM`` (ragged paged attention's ``lm_scratch``, passed for both its m
and l buffers), each alternating two slots per grid step, declared one slot deep (planted: line 22, ``1`` where
``2`` was meant). Tier 3 finds the second step's store past the end of a buffer whose shape two scratch entries
have: one declaration all the same, said at its dim."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def scale_kernel(x_ref, o_ref, m_ref, l_ref):
    slot = pl.program_id(0) % 2
    m_ref[slot] = x_ref[...] * 2.0
    l_ref[slot] = x_ref[...] + 1.0
    o_ref[...] = (m_ref[slot] + l_ref[slot]).astype(o_ref.dtype)


def scale(x):
    n, r, c = x.shape
    spec = pl.BlockSpec((None, r, c), lambda i: (i, 0, 0))
    slots = pltpu.VMEM((1, r, c), jnp.float32)
    return pl.pallas_call(
        scale_kernel,
        grid=(n,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[slots, slots],
    )(x)


def reference(x):
    return x * 3.0 + 1.0


def example_inputs():
    return (jax.ShapeDtypeStruct((4, 8, 128), jnp.float32),)

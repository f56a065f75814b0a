"""Scales each row block by a module constant through a helper function (results-reuse fixture).

Editing SCALE or the body of ``_scaled`` changes the lowered kernel, so a stored tier-2 verdict
must not be reused after such an edit.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

SCALE = 2.0
BLOCK_ROWS = 128


def _scaled(x):
    return x * SCALE


def scale_kernel(x_ref, o_ref):
    o_ref[...] = _scaled(x_ref[...])


def scale_rows(x):
    spec = pl.BlockSpec((BLOCK_ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // BLOCK_ROWS,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 256), jnp.float32),)


def reference(x):
    return SCALE * x

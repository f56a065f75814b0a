"""A kernel asserts the shape of a scratch buffer it reads through a helper (a bare ``assert``
written over several lines, as kernel libraries do); the scratch was declared with a lane dim of
100 instead of 128. The assert fails inside the kernel while it is traced: the finding belongs at
the scratch's declared dim, not at the assert."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS = 8
LANES = 128


def rowmax_kernel(x_ref, o_ref, stats_ref):
    def update(head, row_stats_ref):
        assert (
            row_stats_ref.shape
            == (ROWS, LANES)
        )
        row_stats_ref[...] = jnp.broadcast_to(jnp.max(x_ref[...], axis=1, keepdims=True), row_stats_ref.shape)
        o_ref[head] = row_stats_ref[...]

    for head in range(2):
        update(head, stats_ref.at[head])


def rowmax(x):
    stats = pltpu.VMEM(
        (2, ROWS, 100),  # expect: PLS100
        jnp.float32,
    )
    return pl.pallas_call(
        rowmax_kernel,
        grid=(x.shape[0] // ROWS,),
        in_specs=[pl.BlockSpec((ROWS, LANES), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((2, ROWS, LANES), lambda i: (0, i, 0)),
        out_shape=jax.ShapeDtypeStruct((2, x.shape[0], LANES), x.dtype),
        scratch_shapes=[stats],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 128), jnp.float32),)


PALLASITE_ENTRY = "rowmax"

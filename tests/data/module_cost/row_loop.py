"""An add that walks every row of its one block in a loop whose trip count is an input (tests/test_loop_bounds.py):
with the count known it is exact; without it, the pricer cannot know how many trips run, and bounds them by
what the loop reaches (rows / rows per trip). ``accumulate`` loops as many times over one fixed block: nothing
it reads or writes moves with the loop's index, so nothing bounds it."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS_PER_TRIP = 8


def add_kernel(n_ref, x_ref, y_ref, o_ref):
    def body(i, carry):
        rows = pl.ds(pl.multiple_of(i * ROWS_PER_TRIP, ROWS_PER_TRIP), ROWS_PER_TRIP)
        o_ref[rows, :] = x_ref[rows, :] + y_ref[rows, :]
        return carry

    jax.lax.fori_loop(0, n_ref[0], body, 0)


def add(n, x, y):
    whole = pl.BlockSpec(x.shape, lambda i, n_: (0, 0))
    return pl.pallas_call(add_kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(1,), in_specs=[whole, whole], out_specs=whole),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(n, x, y)


def accumulate_kernel(n_ref, x_ref, o_ref):
    o_ref[...] = jnp.zeros_like(o_ref)

    def body(i, carry):
        o_ref[...] += jnp.exp(x_ref[...])
        return carry

    jax.lax.fori_loop(0, n_ref[0], body, 0)


def accumulate(n, x):
    whole = pl.BlockSpec(x.shape, lambda i, n_: (0, 0))
    return pl.pallas_call(accumulate_kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(1,), in_specs=[whole], out_specs=whole),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(n, x)


def example_inputs(rows: int = 256, cols: int = 128):
    return (jax.ShapeDtypeStruct((1,), jnp.int32), jax.ShapeDtypeStruct((rows, cols), jnp.float32),
            jax.ShapeDtypeStruct((rows, cols), jnp.float32))

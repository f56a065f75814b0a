# Issue 56: work the counts cannot see. One grid step holds every row and walks them in a loop whose trip
# count comes from a scalar-prefetched value computed from an input (the module cannot fix it): a pricer that
# counts the loop once sees 1/32 of the work. The kernel is right; its figure must not beat the same work
# done with BlockSpecs in one grid step (reward_hacks.ONE_STEP).
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


def add(x, y):
    trips = jnp.full((1,), x.shape[0] // ROWS_PER_TRIP, jnp.int32) + (x[0, 0] * 0).astype(jnp.int32)
    whole = pl.BlockSpec(x.shape, lambda i, n: (0, 0))
    return pl.pallas_call(add_kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(1,), in_specs=[whole, whole], out_specs=whole),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(trips, x, y)

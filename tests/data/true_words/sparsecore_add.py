"""A SparseCore kernel: each vector subcore of one SparseCore adds its slice of two vectors (pl.kernel over
a VectorSubcoreMesh: the file writes no pallas_call). For chips with SparseCores (7x)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import tpu_sc as plsc

PALLASITE_ENTRY = "sc_add"
LANES = 16


def sc_add(x, y):
    mesh = plsc.VectorSubcoreMesh(core_axis_name="core", subcore_axis_name="subcore", num_cores=1)

    @functools.partial(pl.kernel, out_type=jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh,
                       scratch_types=[pltpu.VMEM((LANES,), x.dtype), pltpu.VMEM((LANES,), x.dtype)])
    def add_kernel(x_hbm, y_hbm, o_hbm, x_vmem, y_vmem):
        i = jax.lax.axis_index("subcore") * LANES
        pltpu.sync_copy(x_hbm.at[pl.ds(i, LANES)], x_vmem)
        pltpu.sync_copy(y_hbm.at[pl.ds(i, LANES)], y_vmem)
        x_vmem[...] = x_vmem[...] + y_vmem[...]
        pltpu.sync_copy(x_vmem, o_hbm.at[pl.ds(i, LANES)])

    return add_kernel(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((16 * LANES,), jnp.float32)
    return (s, s)


def reference(x, y):
    return x + y

"""Candidate: the inputs stay in HBM (pl.ANY) and the kernel copies its rows by its own DMAs, started and waited
at once: right, priced by the bytes its DMAs move, none of them hidden behind its compute (the cost model
counted none of them before issue 56)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS = 128


def add_kernel(x_hbm, y_hbm, o_ref, x_buf, y_buf, sem):
    start = pl.multiple_of(pl.program_id(0) * ROWS, ROWS)
    copy_x = pltpu.make_async_copy(x_hbm.at[pl.ds(start, ROWS)], x_buf, sem.at[0])
    copy_y = pltpu.make_async_copy(y_hbm.at[pl.ds(start, ROWS)], y_buf, sem.at[1])
    copy_x.start()
    copy_y.start()
    copy_x.wait()
    copy_y.wait()
    o_ref[...] = x_buf[...] + y_buf[...]


def add(x, y):
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // ROWS,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((ROWS, x.shape[1]), x.dtype), pltpu.VMEM((ROWS, x.shape[1]), x.dtype),
                        pltpu.SemaphoreType.DMA((2,))],
    )(x, y)


def example_inputs(rows: int = 256, cols: int = 128):
    return (jax.ShapeDtypeStruct((rows, cols), jnp.float32), jax.ShapeDtypeStruct((rows, cols), jnp.float32))


def reference(x, y):
    return x + y

"""A kernel that copies its row block from HBM before using it, the copy's start guarded by a ``pl.when`` that
is never true (planted: line 17, ``< 0`` where ``>= 0`` was meant) while its wait is not: on a TPU the wait
hangs. Tier 3's interpreter slept until its time limit; now it says so at once."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS = 8


def copy_kernel(x_hbm, o_ref, buf, sem):
    i = pl.program_id(0)
    copy = pltpu.make_async_copy(x_hbm.at[pl.ds(i * ROWS, ROWS)], buf, sem)

    @pl.when(i < 0)
    def _():
        copy.start()

    copy.wait()
    o_ref[...] = buf[...] * 2.0


def double(x):
    n, c = x.shape
    return pl.pallas_call(
        copy_kernel,
        grid=(n // ROWS,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((ROWS, c), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((ROWS, c), x.dtype), pltpu.SemaphoreType.DMA(())],
    )(x)


def reference(x):
    return x * 2.0


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)

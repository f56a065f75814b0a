"""An out-of-bounds dynamic DMA: the window starts one block too late on the last grid step.

``interpret=True`` alone silently clamps the copy; on a TPU it reads past the end of the array.
Tier 3 runs with ``out_of_bounds_reads="raise"`` and reports the copy below.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS = 8


def shifted_kernel(x_hbm, o_ref, buf, sem):
    i = pl.program_id(0)
    start = (i + 1) * ROWS  # the next block: past the end on the last step
    copy = pltpu.make_async_copy(x_hbm.at[pl.ds(start, ROWS)], buf, sem)
    copy.start()
    copy.wait()
    o_ref[...] = buf[...]


def shifted(x):
    return pl.pallas_call(
        shifted_kernel,
        grid=(x.shape[0] // ROWS,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((ROWS, x.shape[1]), x.dtype), pltpu.SemaphoreType.DMA],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)


def reference(x):
    return jnp.concatenate([x[ROWS:], x[:ROWS]], axis=0)

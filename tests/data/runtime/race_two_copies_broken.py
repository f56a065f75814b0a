"""Two async copies write the same VMEM buffer at once: both are started before either is waited
on, so which one lands last is up to the DMA engines. Tier 3 reports the write-write race."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def sum_halves_kernel(x_hbm, o_ref, buf, sems):
    top = pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf, sems.at[0])
    bottom = pltpu.make_async_copy(x_hbm.at[pl.ds(8, 8)], buf, sems.at[1])
    top.start()
    bottom.start()  # overwrites buf while the first copy may still be writing it
    top.wait()
    first = buf[...]
    bottom.wait()
    o_ref[...] = first + buf[...]


def sum_halves(x):
    return pl.pallas_call(
        sum_halves_kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct((8, x.shape[1]), x.dtype),
        scratch_shapes=[pltpu.VMEM((8, x.shape[1]), x.dtype), pltpu.SemaphoreType.DMA((2,))],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)


def reference(x):
    return x[:8] + x[8:]

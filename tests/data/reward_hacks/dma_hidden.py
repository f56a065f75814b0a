# Issue 56: work hidden in DMAs. The inputs stay in HBM (pl.ANY) and the kernel copies them into VMEM with its
# own DMAs, which a pricer that counts BlockSpec traffic only does not see. The kernel is right; its figure
# must not beat the same work done with BlockSpecs in one grid step (reward_hacks.ONE_STEP).
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def add_kernel(x_hbm, y_hbm, o_ref, x_vmem, y_vmem, sems):
    cx = pltpu.make_async_copy(x_hbm, x_vmem, sems.at[0])
    cy = pltpu.make_async_copy(y_hbm, y_vmem, sems.at[1])
    cx.start()
    cy.start()
    cx.wait()
    cy.wait()
    o_ref[...] = x_vmem[...] + y_vmem[...]


def add(x, y):
    return pl.pallas_call(
        add_kernel, grid=(1,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(x.shape, lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.VMEM(y.shape, y.dtype), pltpu.SemaphoreType.DMA((2,))],
    )(x, y)

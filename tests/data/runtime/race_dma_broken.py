"""A DMA race: the kernel reads the VMEM buffer while the async copy into it is still in flight.

On a TPU the read sees whatever the DMA engine has written so far. Tier 3 (TPU interpret mode with
race detection) reports the read at the line below that uses the buffer before ``copy.wait()``.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def double_kernel(x_hbm, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_hbm, buf, sem)
    copy.start()
    o_ref[...] = buf[...] * 2.0  # reads buf before the copy has finished
    copy.wait()


def double(x):
    return pl.pallas_call(
        double_kernel,
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM(x.shape, x.dtype), pltpu.SemaphoreType.DMA],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)


def reference(x):
    return x * 2.0

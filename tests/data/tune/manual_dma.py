"""A kernel that copies its input from HBM itself (``memory_space=pl.ANY``): per grid step, a
``fori_loop`` of 4 chunk copies (bf16 (64, 512) each), plus one extra copy of chunk 0 under a
``pl.when`` on the first step only; the result goes out through an ordinary VMEM block.

Hand count (cost model: tests/test_kernel_counts.py): grid 2; per step 4 x 64 x 512 x 2 bytes =
256 KiB by the loop; the pl.when copy 64 KiB, counted on every step as an upper bound (said so).
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CHUNK = 64
CHUNKS = 4


def kernel(x_hbm, o_ref, buf, sem):
    step = pl.program_id(0)

    def body(c, acc):
        row = (step * CHUNKS + c) * CHUNK
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(row, CHUNK)], buf, sem)
        copy.start()
        copy.wait()
        return acc + buf[...].astype(jnp.float32)

    acc = jax.lax.fori_loop(0, CHUNKS, body, jnp.zeros((CHUNK, 512), jnp.float32))

    @pl.when(step == 0)
    def _again():
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(0, CHUNK)], buf, sem)
        copy.start()
        copy.wait()

    o_ref[...] = acc.astype(o_ref.dtype)


def chunk_sum(x):
    steps = x.shape[0] // (CHUNK * CHUNKS)
    return pl.pallas_call(
        kernel,
        grid=(steps,),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((CHUNK, 512), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((steps * CHUNK, 512), x.dtype),
        scratch_shapes=[pltpu.VMEM((CHUNK, 512), x.dtype), pltpu.SemaphoreType.DMA(())],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((2 * CHUNK * CHUNKS, 512), jnp.bfloat16),)


def reference(x):
    steps = x.shape[0] // (CHUNK * CHUNKS)
    return x.reshape(steps, CHUNKS, CHUNK, 512).astype(jnp.float32).sum(1).reshape(steps * CHUNK, 512).astype(x.dtype)

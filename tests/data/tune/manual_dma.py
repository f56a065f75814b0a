"""A kernel that copies its input from HBM itself (``memory_space=pl.ANY``): at grid step s, a
``fori_loop`` of ``n_chunks[s]`` chunk copies (bf16 (64, 512) each; the bound is a scalar-prefetch
value, so the loop is a while loop), plus one extra copy of chunk 0 under a ``pl.when`` on the
first step only; the result goes out through an ordinary VMEM block.

Hand count (tests/test_kernel_counts.py) with n_chunks = [4, 2]: step 0 copies 4 + 1 chunks, step 1
copies 2: 7 copies of 64 x 512 x 2 = 64 KiB.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CHUNK = 64
CHUNKS = 4


def kernel(n_ref, x_hbm, o_ref, buf, sem):
    step = pl.program_id(0)

    def body(c, acc):
        row = (step * CHUNKS + c) * CHUNK
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(row, CHUNK)], buf, sem)
        copy.start()
        copy.wait()
        return acc + buf[...].astype(jnp.float32)

    acc = jax.lax.fori_loop(0, n_ref[step], body, jnp.zeros((CHUNK, 512), jnp.float32))

    @pl.when(step == 0)
    def _again():
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(0, CHUNK)], buf, sem)
        copy.start()
        copy.wait()

    o_ref[...] = acc.astype(o_ref.dtype)


def chunk_sum(x, n_chunks):
    steps = x.shape[0] // (CHUNK * CHUNKS)
    return pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(steps,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((CHUNK, 512), lambda i, n_ref: (i, 0)),
            scratch_shapes=[pltpu.VMEM((CHUNK, 512), x.dtype), pltpu.SemaphoreType.DMA(())],
        ),
        out_shape=jax.ShapeDtypeStruct((steps * CHUNK, 512), x.dtype),
    )(n_chunks, x)


def example_inputs():
    return (jax.ShapeDtypeStruct((2 * CHUNK * CHUNKS, 512), jnp.bfloat16), jax.ShapeDtypeStruct((2,), jnp.int32))


def inputs():
    return (jnp.ones((2 * CHUNK * CHUNKS, 512), jnp.bfloat16), jnp.asarray(np.array([4, 2], np.int32)))


def reference(x, n_chunks):
    steps = x.shape[0] // (CHUNK * CHUNKS)
    chunks = x.reshape(steps, CHUNKS, CHUNK, 512).astype(jnp.float32)
    keep = jnp.arange(CHUNKS)[None, :, None, None] < n_chunks[:, None, None, None]
    return jnp.where(keep, chunks, 0).sum(1).reshape(steps * CHUNK, 512).astype(x.dtype)

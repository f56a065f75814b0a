"""A paged gather: each grid step copies the page the page table names; the copy reads page
``page + 1``, past the last page on the last step. The page table is a concrete array of
``example_inputs`` beside the pages' shape: tier 3 made every input up (page table zeros, so no
copy went past the end) until it kept the arrays given and made up only the shaped ones."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

NUM_PAGES = 4
PAGE = 8


def gather_kernel(pages_ref, kv_hbm, o_ref, buf, sem):
    i = pl.program_id(0)
    page = pages_ref[i]
    copy = pltpu.make_async_copy(kv_hbm.at[pl.ds((page + 1) * PAGE, PAGE)], buf, sem)  # expect: PLS302
    copy.start()
    copy.wait()
    o_ref[...] = buf[...]


def gather(pages, kv):
    return pl.pallas_call(
        gather_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(pages.shape[0],),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((PAGE, 128), lambda i, pages: (i, 0)),
            scratch_shapes=[pltpu.VMEM((PAGE, 128), jnp.float32), pltpu.SemaphoreType.DMA(())],
        ),
        out_shape=jax.ShapeDtypeStruct((pages.shape[0] * PAGE, 128), jnp.float32),
    )(pages, kv)


def example_inputs():
    return (jnp.arange(NUM_PAGES, dtype=jnp.int32), jax.ShapeDtypeStruct((NUM_PAGES * PAGE, 128), jnp.float32))


def reference(pages, kv):
    return kv.reshape(NUM_PAGES, PAGE, 128)[pages].reshape(-1, 128)

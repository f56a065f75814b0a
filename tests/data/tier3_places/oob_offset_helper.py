"""A gather kernel that reads its page table in a copy-descriptor method, from an offset a helper
computes and the descriptor's constructor keeps, as jax's paged attention does
(``MultiPageAsyncCopyDescriptor``, ``create_kv_async_copy_descriptors``). The helper's offset is one
too far, so the last row's read of the table goes past its end. Issue 50: tier 3 said it at the read
in the method (jax's paged attention with this mistake: 121 lines from the offset); the index was
computed in the helper, where the finding belongs, with the read related."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

PAGES_PER_ROW = 2


class PageCopies:
    """The copies of one row's pages from HBM into a VMEM buffer."""

    def __init__(self, pages_hbm, buffer, sem, table_ref, start, count):
        self._pages, self._buffer, self._sem = pages_hbm, buffer, sem
        self._table = table_ref
        self._start = start
        self._copies = [self._copy(i) for i in range(count)]

    def _copy(self, i):
        page = self._table[self._start + i]
        return pltpu.make_async_copy(self._pages.at[page], self._buffer.at[i], self._sem)

    def run(self):
        for copy in self._copies:
            copy.start()
        for copy in self._copies:
            copy.wait()


def gather_kernel(table_ref, pages_hbm, o_ref, buffer, sem):
    row = pl.program_id(0)

    def copies_for(r):
        start = r * PAGES_PER_ROW + 1  # expect: PLS302
        return PageCopies(pages_hbm, buffer, sem, table_ref, start, PAGES_PER_ROW)

    copies_for(row).run()
    o_ref[...] = buffer[...]


def gather(table, pages):
    rows = table.shape[0] // PAGES_PER_ROW
    return pl.pallas_call(
        gather_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(rows,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((None, PAGES_PER_ROW, 8, 128), lambda r, table: (r, 0, 0, 0)),
            scratch_shapes=[pltpu.VMEM((PAGES_PER_ROW, 8, 128), jnp.float32), pltpu.SemaphoreType.DMA(())],
        ),
        out_shape=jax.ShapeDtypeStruct((rows, PAGES_PER_ROW, 8, 128), jnp.float32),
    )(table, pages)


def example_inputs():
    table = jnp.array([3, 1, 0, 2], jnp.int32)
    return (table, jax.ShapeDtypeStruct((4, 8, 128), jnp.float32))


def reference(table, pages):
    return pages[table].reshape(-1, PAGES_PER_ROW, 8, 128)

"""A correct ragged paged reduction whose per-sequence lengths are a module constant, as JAXBench's
ragged paged attention (7p) spells out its scenario apart from CONFIG. The kernel walks as many
pages as the length says. Shrinking CONFIG's ``pages_per_seq`` for tier 3 gives a smaller page
table while the lengths stay: the kernel then reads the table past its end, and a correct kernel
would be blamed. A size is only shrunk where every integer input changes with it."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {
    "name": "ragged_lengths_constant",
    "batch": 64,
    "heads": 8,
    "head_dim": 128,
    "page_size": 16,
    "pages_per_seq": 128,
}
LENGTHS = tuple(16 * (128 - i % 5) for i in range(64))  # tokens per sequence, whole pages


def ragged_kernel(lengths_ref, table_ref, q_ref, k_hbm, o_ref, k_buf, sem):
    b = pl.program_id(0)
    page_size = k_buf.shape[0]

    def body(j, acc):
        copy = pltpu.make_async_copy(k_hbm.at[table_ref[b, j]], k_buf, sem.at[0])
        copy.start()
        copy.wait()
        return acc + k_buf[...].sum(axis=0, keepdims=True)

    acc = jax.lax.fori_loop(0, lengths_ref[b] // page_size, body, jnp.zeros((1, k_buf.shape[1]), jnp.float32))
    o_ref[0] = q_ref[0] + acc


def ragged_sum(q, k_pages, lengths, table):
    batch, heads, dim = q.shape
    return pl.pallas_call(
        ragged_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            grid=(batch,),
            in_specs=[pl.BlockSpec((1, heads, dim), lambda b, lens, table: (b, 0, 0)),
                      pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec((1, heads, dim), lambda b, lens, table: (b, 0, 0)),
            scratch_shapes=[pltpu.VMEM((k_pages.shape[1], dim), jnp.float32), pltpu.SemaphoreType.DMA((1,))],
        ),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
    )(lengths, table, q, k_pages)


def create_inputs(dtype=jnp.float32):
    batch, heads, dim = CONFIG["batch"], CONFIG["heads"], CONFIG["head_dim"]
    page_size, pages_per_seq = CONFIG["page_size"], CONFIG["pages_per_seq"]
    keys = jax.random.split(jax.random.key(0), 2)
    q = jax.random.normal(keys[0], (batch, heads, dim), dtype)
    k_pages = jax.random.normal(keys[1], (batch * pages_per_seq, page_size, dim), dtype)
    lengths = jnp.array(LENGTHS[:batch], jnp.int32)
    table = jnp.arange(batch * pages_per_seq, dtype=jnp.int32).reshape(batch, pages_per_seq)
    return q, k_pages, lengths, table


def workload(q, k_pages, lengths, table):
    return ragged_sum(q, k_pages, lengths, table)

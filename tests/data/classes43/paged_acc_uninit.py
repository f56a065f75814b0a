"""A JAXBench-style paged decode attention whose first-page block resets the running max and sum but
not the accumulator: the first page adds into whatever the scratch held. The inputs (64 MiB of
pages) are shrunk for the interpret run; with the lengths made up as zeros no page was ever
attended to, the accumulator never read, and the output was NaN for another reason (0/0). Drawn
from the task's own ``create_inputs`` at a smaller CONFIG (every page attended), the NaN comes from
the accumulator the first-page block leaves unset."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {
    "name": "paged_decode_acc",
    "batch": 64,
    "heads": 8,
    "head_dim": 128,
    "page_size": 16,
    "pages_per_seq": 64,
}


def paged_kernel(lengths_ref, table_ref, q_ref, k_hbm, v_hbm, o_ref, k_buf, v_buf, sem, m_ref, l_ref, acc_ref):
    b, p = pl.program_id(0), pl.program_id(1)
    page_size = k_buf.shape[0]

    @pl.when(p == 0)
    def _init():
        m_ref[...] = jnp.full(m_ref.shape, -jnp.inf, jnp.float32)
        l_ref[...] = jnp.zeros(l_ref.shape, jnp.float32)  # expect: PLS303

    @pl.when(p * page_size < lengths_ref[b])
    def _step():
        page = table_ref[b, p]
        k_copy = pltpu.make_async_copy(k_hbm.at[page], k_buf, sem.at[0])
        v_copy = pltpu.make_async_copy(v_hbm.at[page], v_buf, sem.at[1])
        k_copy.start()
        v_copy.start()
        k_copy.wait()
        v_copy.wait()
        q = q_ref[0]
        s = jax.lax.dot_general(q, k_buf[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
        m_prev = m_ref[...]
        m_new = jnp.maximum(m_prev, s.max(axis=-1, keepdims=True))
        alpha = jnp.exp(m_prev - m_new)
        prob = jnp.exp(s - m_new)
        l_ref[...] = alpha * l_ref[...] + prob.sum(axis=-1, keepdims=True)
        acc_ref[...] = alpha * acc_ref[...] + jnp.dot(prob, v_buf[...], preferred_element_type=jnp.float32)
        m_ref[...] = m_new

    @pl.when(p == pl.num_programs(1) - 1)
    def _store():
        o_ref[0] = (acc_ref[...] / l_ref[...]).astype(o_ref.dtype)


@jax.jit
def paged_decode(q, k_pages, v_pages, lengths, page_table):
    batch, heads, dim = q.shape
    page_size = k_pages.shape[1]
    pages_per_seq = page_table.shape[1]
    return pl.pallas_call(
        paged_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2,
            grid=(batch, pages_per_seq),
            in_specs=[
                pl.BlockSpec((1, heads, dim), lambda b, p, lens, table: (b, 0, 0)),
                pl.BlockSpec(memory_space=pl.ANY),
                pl.BlockSpec(memory_space=pl.ANY),
            ],
            out_specs=pl.BlockSpec((1, heads, dim), lambda b, p, lens, table: (b, 0, 0)),
            scratch_shapes=[
                pltpu.VMEM((page_size, dim), k_pages.dtype),
                pltpu.VMEM((page_size, dim), v_pages.dtype),
                pltpu.SemaphoreType.DMA((2,)),
                pltpu.VMEM((heads, 1), jnp.float32),
                pltpu.VMEM((heads, 1), jnp.float32),
                pltpu.VMEM((heads, dim), jnp.float32),
            ],
        ),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(lengths, page_table, q, k_pages, v_pages)


def create_inputs(dtype=jnp.float32):
    batch, heads, dim = CONFIG["batch"], CONFIG["heads"], CONFIG["head_dim"]
    page_size, pages_per_seq = CONFIG["page_size"], CONFIG["pages_per_seq"]
    total = batch * pages_per_seq
    keys = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(keys[0], (batch, heads, dim), dtype) * dim ** -0.5
    k_pages = jax.random.normal(keys[1], (total, page_size, dim), dtype)
    v_pages = jax.random.normal(keys[2], (total, page_size, dim), dtype)
    lengths = jnp.full((batch,), pages_per_seq * page_size, jnp.int32)
    page_table = jnp.arange(total, dtype=jnp.int32).reshape(batch, pages_per_seq)
    return q, k_pages, v_pages, lengths, page_table


def workload(q, k_pages, v_pages, lengths, page_table):
    return paged_decode(q, k_pages, v_pages, lengths, page_table)

"""Decode attention over a paged KV cache with paged attention's structure: the lengths and the page
table go to SMEM by scalar prefetch; grid (sequence, page); each step's K/V index map reads the
page it copies from the table; a page past the sequence's length computes nothing (``pl.when`` on
the prefetched length) and its index map repeats the last page, so nothing is copied either.
Online softmax over the pages."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "ladder_paged_attention", "batch": 8, "heads": 8, "head_dim": 128, "page_size": 16,
          "pages_per_seq": 8, "atol": 1e-4, "rtol": 1e-3}
ONE_PAST = False  # True: the key at index `length` is attended too (the planted bug of wrong.py)
NEG = -1e30


def create_inputs(dtype=jnp.float32):
    b, h, d = CONFIG["batch"], CONFIG["heads"], CONFIG["head_dim"]
    size, per = CONFIG["page_size"], CONFIG["pages_per_seq"]
    k1, k2, k3, k4, k5 = jax.random.split(jax.random.key(5), 5)
    q = jax.random.normal(k1, (b, h, d), dtype)
    k_pages = jax.random.normal(k2, (b * per, size, d), dtype)
    v_pages = jax.random.normal(k3, (b * per, size, d), dtype)
    lengths = jax.random.randint(k4, (b,), 1, per * size + 1).astype(jnp.int32)
    table = jax.random.permutation(k5, b * per).astype(jnp.int32).reshape(b, per)
    return q, k_pages, v_pages, lengths, table


def _kernel(lengths_ref, table_ref, q_ref, k_ref, v_ref, o_ref, m_sc, l_sc, acc_sc, *, size, scale):
    b, j = pl.program_id(0), pl.program_id(1)
    length = lengths_ref[b]

    @pl.when(j == 0)
    def _init():
        m_sc[...] = jnp.full_like(m_sc, NEG)
        l_sc[...] = jnp.zeros_like(l_sc)
        acc_sc[...] = jnp.zeros_like(acc_sc)

    @pl.when(j * size < length)
    def _page():
        q, k, v = q_ref[...], k_ref[...], v_ref[...]
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
        pos = j * size + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        s = jnp.where(pos <= length if ONE_PAST else pos < length, s, NEG)
        m_prev = m_sc[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
        p = jnp.exp(s - m_new[:, :1])
        alpha = jnp.exp(m_prev - m_new)
        l_sc[...] = alpha * l_sc[...] + jnp.sum(p, axis=-1, keepdims=True)
        acc_sc[...] = alpha[:, :1] * acc_sc[...] + jnp.dot(p, v, preferred_element_type=jnp.float32)
        m_sc[...] = m_new

    @pl.when(j == pl.num_programs(1) - 1)
    def _done():
        o_ref[...] = (acc_sc[...] / l_sc[...][:, :1]).astype(o_ref.dtype)


def _page_of(b, j, lengths, table, *, size):
    last = jnp.maximum(lengths[b] - 1, 0) // size  # past the length: the last page again, no copy
    return table[b, jnp.minimum(j, last)], 0, 0


def workload(q, k_pages, v_pages, lengths, table):
    b, h, d = q.shape
    per, size = table.shape[1], k_pages.shape[1]
    page = functools.partial(_page_of, size=size)
    kv_spec = pl.BlockSpec((None, size, d), page)
    return pl.pallas_call(
        functools.partial(_kernel, size=size, scale=1.0 / d ** 0.5),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2, grid=(b, per),
            in_specs=[pl.BlockSpec((None, h, d), lambda b_, j, *_: (b_, 0, 0)), kv_spec, kv_spec],
            out_specs=pl.BlockSpec((None, h, d), lambda b_, j, *_: (b_, 0, 0)),
            scratch_shapes=[pltpu.VMEM((h, 128), jnp.float32), pltpu.VMEM((h, 128), jnp.float32),
                            pltpu.VMEM((h, d), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(lengths, table, q, k_pages, v_pages)

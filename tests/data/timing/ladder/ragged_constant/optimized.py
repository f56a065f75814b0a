"""As ragged_paged, with the query lengths a module constant (JAXBench 7p's layout): at a reduced num_seqs
their offsets run past the query buffer, so no reduced size is an instance of the task.
Ragged paged attention with its kernel's structure: KV lengths, page table and cumulative query
lengths go to SMEM by scalar prefetch; grid (sequence, page); each step's K/V index map reads its
page from the table (past the length: the last page again, no copy); a page past the length
computes nothing (``pl.when``); the query rows of the step's sequence (``cu_q_lens``) are updated,
causal at their positions (the sequence's last tokens); the whole query block stays resident."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "ladder_ragged_constant", "num_seqs": 4, "max_q": 8, "head_dim": 128, "page_size": 16,
          "pages_per_seq": 8, "atol": 1e-4, "rtol": 1e-3}
SEES_NEXT = 0  # 1: every query also sees the key after it (the planted bug of wrong.py)
NEG = -1e30

Q_LENS = (1, 7, 8, 8)  # one serving step's query lengths, fixed as JAXBench 7p fixes its scenario

def create_inputs(dtype=jnp.float32):
    b, mq, d = CONFIG["num_seqs"], CONFIG["max_q"], CONFIG["head_dim"]
    size, per = CONFIG["page_size"], CONFIG["pages_per_seq"]
    k1, k2, k3, k4, k5, k6 = jax.random.split(jax.random.key(6), 6)
    q = jax.random.normal(k1, (b * mq, d), dtype)
    k_pages = jax.random.normal(k2, (b * per, size, d), dtype)
    v_pages = jax.random.normal(k3, (b * per, size, d), dtype)
    q_lens = jnp.array(Q_LENS, jnp.int32)  # the scenario's constants: they do not follow CONFIG
    kv_lens = jnp.maximum(jax.random.randint(k5, (len(Q_LENS),), 1, per * size + 1), q_lens).astype(jnp.int32)
    cu_q_lens = jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(q_lens).astype(jnp.int32)])
    table = jax.random.permutation(k6, b * per).astype(jnp.int32).reshape(b, per)
    return q, k_pages, v_pages, kv_lens, table, cu_q_lens


def _kernel(kv_lens_ref, table_ref, cu_ref, q_ref, k_ref, v_ref, o_ref, m_sc, l_sc, acc_sc, *, size, scale):
    b, j = pl.program_id(0), pl.program_id(1)
    length, start, end = kv_lens_ref[b], cu_ref[b], cu_ref[b + 1]

    @pl.when((b == 0) & (j == 0))
    def _init():
        m_sc[...] = jnp.full_like(m_sc, NEG)
        l_sc[...] = jnp.zeros_like(l_sc)
        acc_sc[...] = jnp.zeros_like(acc_sc)

    @pl.when(j * size < length)
    def _page():
        q, k, v = q_ref[...], k_ref[...], v_ref[...]
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
        row = jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
        key = j * size + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
        qpos = length - (end - row)
        valid = (row >= start) & (row < end) & (key <= qpos + SEES_NEXT) & (key < length + SEES_NEXT)
        s = jnp.where(valid, s, NEG)
        m_prev = m_sc[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
        p = jnp.where(valid, jnp.exp(s - m_new[:, :1]), 0.0)
        alpha = jnp.exp(m_prev - m_new)
        l_sc[...] = alpha * l_sc[...] + jnp.sum(p, axis=-1, keepdims=True)
        acc_sc[...] = alpha[:, :1] * acc_sc[...] + jnp.dot(p, v, preferred_element_type=jnp.float32)
        m_sc[...] = m_new

    @pl.when((b == pl.num_programs(0) - 1) & (j == pl.num_programs(1) - 1))
    def _done():
        l = l_sc[...][:, :1]
        o_ref[...] = jnp.where(l > 0, acc_sc[...] / jnp.where(l > 0, l, 1.0), 0.0).astype(o_ref.dtype)


def _page_of(b, j, kv_lens, table, cu, *, size):
    last = jnp.maximum(kv_lens[b] - 1, 0) // size  # past the length: the last page again, no copy
    return table[b, jnp.minimum(j, last)], 0, 0


def workload(q, k_pages, v_pages, kv_lens, table, cu_q_lens):
    rows, d = q.shape
    b, per = table.shape
    size = k_pages.shape[1]
    kv_spec = pl.BlockSpec((None, size, d), functools.partial(_page_of, size=size))
    whole = pl.BlockSpec((rows, d), lambda b_, j, *_: (0, 0))
    return pl.pallas_call(
        functools.partial(_kernel, size=size, scale=1.0 / d ** 0.5),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=3, grid=(b, per), in_specs=[whole, kv_spec, kv_spec], out_specs=whole,
            scratch_shapes=[pltpu.VMEM((rows, 128), jnp.float32), pltpu.VMEM((rows, 128), jnp.float32),
                            pltpu.VMEM((rows, d), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary", "arbitrary")),
    )(kv_lens, table, cu_q_lens, q, k_pages, v_pages)

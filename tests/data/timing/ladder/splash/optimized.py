"""Block-sparse causal attention with splash attention's structure: a block mask (0 skip, 1 partial,
2 full) and the next K/V block to fetch go to SMEM by scalar prefetch; a grid step whose block is
masked out computes nothing (``pl.when`` on the mask entry) and its K/V index map repeats the
previous block, so no copy is made either. Online softmax over the K/V blocks of a query block."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "ladder_splash", "batch": 1, "num_heads": 2, "seq_len": 512, "head_dim": 128,
          "atol": 2e-3, "rtol": 2e-3}
TUNED_PARAMS = {"block_q": 128, "block_kv": 128}
DIAGONAL_FULL = False  # True: the diagonal blocks are taken as full (the planted bug of wrong.py)
SKIP = True  # False: every block computed (the dense kernel the estimate is compared with)
NEG = -1e30


def create_inputs(dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    shape = (CONFIG["batch"], CONFIG["num_heads"], CONFIG["seq_len"], CONFIG["head_dim"])
    return tuple(jax.random.normal(k, shape, dtype) for k in (k1, k2, k3))


def block_mask(nq: int, nkv: int) -> tuple[np.ndarray, np.ndarray]:
    """(kind, next): kind 2 below the diagonal, 1 on it, 0 above; next = the K/V block to hold."""
    i, j = np.indices((nq, nkv))
    kind = np.where(j < i, 2, np.where(j == i, 2 if DIAGONAL_FULL else 1, 0))
    if not SKIP:
        kind = np.maximum(kind, 1)
        return kind.astype(np.int32), j.astype(np.int32)
    return kind.astype(np.int32), np.minimum(j, i).astype(np.int32)


def _kernel(kind_ref, next_ref, q_ref, k_ref, v_ref, o_ref, m_sc, l_sc, acc_sc, *, scale, bq, bkv, nkv):
    i, j = pl.program_id(2), pl.program_id(3)

    @pl.when(j == 0)
    def _init():
        m_sc[...] = jnp.full_like(m_sc, NEG)
        l_sc[...] = jnp.zeros_like(l_sc)
        acc_sc[...] = jnp.zeros_like(acc_sc)

    kind = kind_ref[i, j]

    @pl.when(kind > 0)
    def _run():
        q, k, v = q_ref[...], k_ref[...], v_ref[...]
        s = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
        rows = i * bq + jax.lax.broadcasted_iota(jnp.int32, (bq, bkv), 0)
        cols = next_ref[i, j] * bkv + jax.lax.broadcasted_iota(jnp.int32, (bq, bkv), 1)
        s = jnp.where((kind == 2) | (cols <= rows), s, NEG)
        m_prev = m_sc[...]
        m_new = jnp.maximum(m_prev, jnp.max(s, axis=-1, keepdims=True))
        p = jnp.exp(s - m_new[:, :1])
        alpha = jnp.exp(m_prev - m_new)
        l_sc[...] = alpha * l_sc[...] + jnp.sum(p, axis=-1, keepdims=True)
        acc_sc[...] = alpha[:, :1] * acc_sc[...] + jnp.dot(p, v, preferred_element_type=jnp.float32)
        m_sc[...] = m_new

    @pl.when(j == nkv - 1)
    def _done():
        o_ref[...] = (acc_sc[...] / l_sc[...][:, :1]).astype(o_ref.dtype)


def workload(q, k, v):
    b, h, s, d = q.shape
    bq, bkv = TUNED_PARAMS["block_q"], TUNED_PARAMS["block_kv"]
    nq, nkv = s // bq, s // bkv
    kind, nxt = block_mask(nq, nkv)
    kernel = functools.partial(_kernel, scale=1.0 / d ** 0.5, bq=bq, bkv=bkv, nkv=nkv)
    kv_spec = pl.BlockSpec((None, None, bkv, d), lambda b_, h_, i, j, kind_, next_: (b_, h_, next_[i, j], 0))
    q_spec = pl.BlockSpec((None, None, bq, d), lambda b_, h_, i, j, kind_, next_: (b_, h_, i, 0))
    return pl.pallas_call(
        kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=2, grid=(b, h, nq, nkv),
            in_specs=[q_spec, kv_spec, kv_spec], out_specs=q_spec,
            scratch_shapes=[pltpu.VMEM((bq, 128), jnp.float32), pltpu.VMEM((bq, 128), jnp.float32),
                            pltpu.VMEM((bq, d), jnp.float32)]),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
    )(jnp.asarray(kind), jnp.asarray(nxt), q, k, v)

"""The grouped-query attention kernel with a planted bug: query head h reads kv head h % kv_heads
instead of h // group (the kv heads tiled across the query heads, not repeated; wrong whenever a
group has more than one head and there are two or more kv heads). Otherwise as optimized.py."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"name": "ladder_gqa", "batch": 2, "seq_len": 512, "num_query_heads": 8, "num_kv_heads": 2,
          "head_dim": 128, "atol": 2e-3, "rtol": 2e-3}
BLOCK_Q = 128
HEAD_MOD = True  # planted: query head h reads kv head h % kv_heads, not h // group


def create_inputs(dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.key(7), 3)
    b, s, d = CONFIG["batch"], CONFIG["seq_len"], CONFIG["head_dim"]
    q = jax.random.normal(k1, (b, s, CONFIG["num_query_heads"], d), dtype)
    k = jax.random.normal(k2, (b, s, CONFIG["num_kv_heads"], d), dtype)
    v = jax.random.normal(k3, (b, s, CONFIG["num_kv_heads"], d), dtype)
    return q, k, v


def _kernel(q_ref, k_ref, v_ref, o_ref, *, scale):
    q, k, v = q_ref[0, 0], k_ref[0, 0], v_ref[0, 0]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * scale
    rows = pl.program_id(2) * BLOCK_Q + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
    cols = jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    s = jnp.where(cols <= rows, s, -jnp.inf)
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    o_ref[0, 0] = jnp.dot(p, v, preferred_element_type=jnp.float32).astype(o_ref.dtype)


def workload(q, k, v):
    b, s, hq, d = q.shape
    hkv = k.shape[2]
    group = hq // hkv

    def kv_head(h):
        return h % hkv if HEAD_MOD else h // group

    q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))  # (batch, heads, seq, head_dim)
    out = pl.pallas_call(
        functools.partial(_kernel, scale=1.0 / (d ** 0.5)),
        grid=(b, hq, s // BLOCK_Q),
        in_specs=[pl.BlockSpec((1, 1, BLOCK_Q, d), lambda i, h, j: (i, h, j, 0)),
                  pl.BlockSpec((1, 1, s, d), lambda i, h, j: (i, kv_head(h), 0, 0)),
                  pl.BlockSpec((1, 1, s, d), lambda i, h, j: (i, kv_head(h), 0, 0))],
        out_specs=pl.BlockSpec((1, 1, BLOCK_Q, d), lambda i, h, j: (i, h, j, 0)),
        out_shape=jax.ShapeDtypeStruct((b, hq, s, d), q.dtype),
    )(q, k, v)
    return out.transpose(0, 2, 1, 3)

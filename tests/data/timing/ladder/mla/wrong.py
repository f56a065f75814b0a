"""Absorbed multi-head latent attention with a planted bug: the output is projected with the keys'
up-projection instead of the values'. Otherwise as optimized.py."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "ladder_mla", "batch": 2, "num_heads": 4, "seq_len": 256, "head_dim": 128, "rank": 128,
          "atol": 2e-3, "rtol": 2e-3}
BLOCK_Q = 128
VALUES_FROM_KEYS = True  # planted: the values projected out with the keys' weights


def create_inputs(dtype=jnp.float32):
    b, h, s, d, r = (CONFIG[k] for k in ("batch", "num_heads", "seq_len", "head_dim", "rank"))
    k1, k2, k3, k4 = jax.random.split(jax.random.key(7), 4)
    q = jax.random.normal(k1, (b, h, s, d), dtype)
    c = jax.random.normal(k2, (b, s, r), dtype)
    w_uk = jax.random.normal(k3, (h, r, d), dtype) / r ** 0.5
    w_uv = jax.random.normal(k4, (h, r, d), dtype) / r ** 0.5
    return q, c, w_uk, w_uv


def _kernel(q_ref, c_ref, wk_ref, wv_ref, o_ref, *, scale):
    q, c, wk = q_ref[...], c_ref[...], wk_ref[...]
    wv = wk if VALUES_FROM_KEYS else wv_ref[...]
    q_lat = jax.lax.dot_general(q, wk, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)  # (bq, r)
    s = jax.lax.dot_general(q_lat, c, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) * scale
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    o_lat = jnp.dot(p, c, preferred_element_type=jnp.float32)  # (bq, r)
    o_ref[...] = jnp.dot(o_lat, wv, preferred_element_type=jnp.float32).astype(o_ref.dtype)


def workload(q, c, w_uk, w_uv):
    b, h, s, d = q.shape
    r = c.shape[-1]
    q_spec = pl.BlockSpec((None, None, BLOCK_Q, d), lambda b_, h_, i: (b_, h_, i, 0))
    w_spec = pl.BlockSpec((None, r, d), lambda b_, h_, i: (h_, 0, 0))
    return pl.pallas_call(
        functools.partial(_kernel, scale=1.0 / d ** 0.5),
        grid=(b, h, s // BLOCK_Q),
        in_specs=[q_spec, pl.BlockSpec((None, s, r), lambda b_, h_, i: (b_, 0, 0)), w_spec, w_spec],
        out_specs=q_spec,
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "parallel")),
    )(q, c, w_uk, w_uv)

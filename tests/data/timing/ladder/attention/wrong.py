"""The attention kernel with a planted bug: no 1/sqrt(d) scale (wrong at every size). Otherwise as
optimized.py: grid (batch*heads, seq / BLOCK_Q), keys and values whole in each step."""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"name": "ladder_attention", "batch": 2, "num_heads": 4, "seq_len": 512, "head_dim": 128,
          "atol": 2e-3, "rtol": 2e-3}
BLOCK_Q = 128
SCALE_WRONG = True  # planted: the softmax scale is left out


def create_inputs(dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    shape = (CONFIG["batch"], CONFIG["num_heads"], CONFIG["seq_len"], CONFIG["head_dim"])
    return tuple(jax.random.normal(k, shape, dtype) for k in (k1, k2, k3))


def _kernel(q_ref, k_ref, v_ref, o_ref, *, scale):
    q, k, v = q_ref[0], k_ref[0], v_ref[0]
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * scale
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    o_ref[0] = jnp.dot(p, v, preferred_element_type=jnp.float32).astype(o_ref.dtype)


def workload(q, k, v):
    b, h, s, d = q.shape
    scale = 1.0 if SCALE_WRONG else 1.0 / (d ** 0.5)
    flat = [x.reshape(b * h, s, d) for x in (q, k, v)]
    out = pl.pallas_call(
        functools.partial(_kernel, scale=scale),
        grid=(b * h, s // BLOCK_Q),
        in_specs=[pl.BlockSpec((1, BLOCK_Q, d), lambda i, j: (i, j, 0)),
                  pl.BlockSpec((1, s, d), lambda i, j: (i, 0, 0)),
                  pl.BlockSpec((1, s, d), lambda i, j: (i, 0, 0))],
        out_specs=pl.BlockSpec((1, BLOCK_Q, d), lambda i, j: (i, j, 0)),
        out_shape=jax.ShapeDtypeStruct((b * h, s, d), q.dtype),
    )(*flat)
    return out.reshape(b, h, s, d)

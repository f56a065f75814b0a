# harness for: tops:tops/ops/gla/chunk.py
# ruff: noqa
# Appended to the kernel file: all four of the file's pallas_calls (chunk_local_cumsum_vector's chunk_cumsum_kernel,
# chunk_gla_fwd_intra_gk, chunk_gla_fwd_o_gk_pl and chunk_gla_bwd_fused_pl).
#  1. chunk_gla (as tests/ops/gla/test_pallas_chunk_gla.py calls it) on B=1, T=48 (3 chunks of 16), 2 heads,
#     K=160, V=72 (padded to 256 and 128: the cumsum kernel's grid has 2 K tiles), per-token log gates g, an initial
#     state, scale 0.3; returns (o, ht). Not the varlen path: its wrapper reads cu_seqlens with tolist(), which no
#     jax trace (jit, make_jaxpr) can do, so a checker that lowers the task could not run it.
#  2. chunk_gla_fwd without cu_seqlens, B=2, T=32 (2 chunks of 16), 2 heads, K=128, V=256, gates g and an initial
#     state (the non-varlen cumsum path), returning (o, ht); then chunk_gla_bwd_with_pl on the same inputs with an
#     output gradient do and a final-state gradient dht (as tests/ops/gla/test_pallas_chunk_bwd_with_pl.py calls
#     it; K, V multiples of 128 and T of the chunk, as it needs), returning (dq, dk, dv, dg, dh0).
# float32. chunk_fwd_h_kernel / chunk_bwd_dh_kernel come from tops.ops.common.chunk_h (not this file). The
# reference is the sibling module tops/ops/gla/naive.py's naive_recurrent_gla (token-by-token recurrence), jitted;
# the backward reference is jax.vjp of it with cotangents (do, dht) for (q, k, v, g, h0).
import jax
import jax.numpy as jnp
import numpy as np

from tops.ops.gla.naive import naive_recurrent_gla as _naive_recurrent_gla

_T1 = 48
_H, _K1, _V1 = 2, 160, 72
_B2, _T2, _K2, _V2 = 2, 32, 128, 256
_C = 16
_SCALE = 0.3
PALLASITE_ENTRY = "harness_chunk_gla"
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}


def harness_chunk_gla(q, k, v, g, h0, q2, k2, v2, g2, h02, do2, dht2):
    o1, ht1 = chunk_gla(q, k, v, g=g, scale=_SCALE, initial_state=h0, output_final_state=True,
                        chunk_size=_C)
    _, _, _, ht2, o2 = chunk_gla_fwd(q2, k2, v2, g2, None, None, scale=_SCALE, initial_state=h02,
                                     output_final_state=True, chunk_size=_C)
    dq, dk, dv, dg, dh0 = chunk_gla_bwd_with_pl(q2, k2, v2, g2, None, None, scale=_SCALE, initial_state=h02,
                                                h=None, A=None, do=do2, dht=dht2, chunk_size=_C)
    return o1, ht1, o2, ht2, dq, dk, dv, dg, dh0


def _gates(key, shape, bias):
    return jax.nn.log_sigmoid(bias + jax.random.normal(key, shape, jnp.float32))


def example_inputs():
    t, n = _T1, 1
    keys = jax.random.split(jax.random.key(4242), 13)
    q = jax.random.normal(keys[0], (1, t, _H, _K1), jnp.float32)
    k = 0.5 * jax.random.normal(keys[1], (1, t, _H, _K1), jnp.float32)
    v = jax.random.normal(keys[2], (1, t, _H, _V1), jnp.float32) + 0.1
    g = _gates(keys[3], (1, t, _H, _K1), 1.5)
    h0 = jax.random.normal(keys[4], (n, _H, _K1, _V1), jnp.float32)
    s2k, s2v = (_B2, _T2, _H, _K2), (_B2, _T2, _H, _V2)
    q2 = jax.random.normal(keys[5], s2k, jnp.float32)
    k2 = 0.5 * jax.random.normal(keys[6], s2k, jnp.float32)
    v2 = jax.random.normal(keys[7], s2v, jnp.float32) - 0.1
    g2 = _gates(keys[8], s2k, 1.0)
    h02 = jax.random.normal(keys[9], (_B2, _H, _K2, _V2), jnp.float32)
    do2 = jax.random.normal(keys[10], s2v, jnp.float32)
    dht2 = jax.random.normal(keys[11], (_B2, _H, _K2, _V2), jnp.float32)
    return (q, k, v, g, h0, q2, k2, v2, g2, h02, do2, dht2)


@jax.jit
def _ref_dense(q, k, v, g, h0):
    return _naive_recurrent_gla(q, k, v, g, scale=_SCALE, initial_state=h0, output_final_state=True)


def reference(q, k, v, g, h0, q2, k2, v2, g2, h02, do2, dht2):
    with jax.default_matmul_precision("highest"):
        o1, ht1 = _ref_dense(q, k, v, g, h0)
        (o2, ht2), vjp = jax.vjp(_ref_dense, q2, k2, v2, g2, h02)
        dq, dk, dv, dg, dh0 = vjp((do2, dht2))
    return o1, ht1, o2, ht2, dq, dk, dv, dg, dh0

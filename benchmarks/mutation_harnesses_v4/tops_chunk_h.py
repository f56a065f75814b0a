# harness for: tops:tops/ops/common/chunk_h.py
# ruff: noqa
# Appended to the kernel file: both of the file's pallas_calls. chunk_fwd_h_kernel (inter-chunk state propagation,
# chunk 32, with a per-head scalar decay g_gamma, a chunk-local-cumsum key gate gk and an initial state h0, as
# tests/ops/gla/test_pallas_chunk_fwd_h.py calls it) on three packed sequences of 64, 32 and 96 tokens (cu_seqlens
# [0, 64, 96, 192], B=1), 2 heads, K=256, V=384 (grid 2 x 2 x 3), float32: once with split_size None (a state per
# chunk) and once with split_size 64 (a state every other chunk), returning (h, ht) of each. Then
# chunk_bwd_dh_kernel (as tests/ops/gla/test_plkernel_chunk_bwd_dh.py calls it) on the same packing with gk, a
# terminal-state gradient dht and scale 0.3, returning (dh, dh0).
# The references are written here in plain JAX: the forward one runs the token-by-token recurrence
# h_t = h_{t-1} * exp(gamma + a_t) + k_t^T v_t (a_t the per-token log gate whose chunk-local cumsum is gk) and records
# the state at each chunk start; the backward one runs the reverse chunk recursion dh <- dh * exp(gk_last) +
# (q * exp(gk) * scale)^T do from dht, recording dh before each chunk and dh0 at each sequence start.
import jax
import jax.numpy as jnp
import numpy as np

_CU = (0, 64, 96, 192)
_BT = 32
_H, _K, _V = 2, 256, 384
_SCALE = 0.3
PALLASITE_ENTRY = "harness_chunk_h"
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}


def harness_chunk_h(k, v, gk, g_gamma, h0, q, do, dht, cu_seqlens):
    h1, ht1 = chunk_fwd_h_kernel(k, v, g_gamma=g_gamma, gk=gk, h0=h0, output_final_state=True,
                                 cu_seqlens=cu_seqlens, chunk_size=_BT)
    h2, ht2 = chunk_fwd_h_kernel(k, v, g_gamma=g_gamma, gk=gk, h0=h0, output_final_state=True,
                                 cu_seqlens=cu_seqlens, chunk_size=_BT, split_size=2 * _BT)
    dh, dh0 = chunk_bwd_dh_kernel(q, k, v, gk=gk, do=do, dht=dht, scale=_SCALE, cu_seqlens=cu_seqlens,
                                  chunk_size=_BT)
    return h1, ht1, h2, ht2, dh, dh0


def _raw_gates(key, t):
    return jax.nn.log_sigmoid(2.0 + jax.random.normal(key, (1, t, _H, _K), jnp.float32))


def _chunk_cumsum(a):
    t = a.shape[1]
    return jnp.cumsum(a.reshape(1, t // _BT, _BT, _H, _K), axis=2).reshape(a.shape)


def example_inputs():
    t = _CU[-1]
    n = len(_CU) - 1
    keys = jax.random.split(jax.random.key(2024), 8)
    k = 0.2 * jax.random.normal(keys[0], (1, t, _H, _K), jnp.float32)
    v = jax.random.normal(keys[1], (1, t, _H, _V), jnp.float32) + 0.1 * jnp.arange(_V, dtype=jnp.float32) / _V
    gk = _chunk_cumsum(_raw_gates(keys[2], t))
    g_gamma = jnp.array([-0.02, -0.07], jnp.float32)
    h0 = jax.random.normal(keys[3], (n, _H, _K, _V), jnp.float32)
    q = jax.random.normal(keys[4], (1, t, _H, _K), jnp.float32)
    do = jax.random.normal(keys[5], (1, t, _H, _V), jnp.float32)
    dht = jax.random.normal(keys[6], (n, _H, _K, _V), jnp.float32)
    cu_seqlens = jnp.asarray(_CU, jnp.int32)
    return (k, v, gk, g_gamma, h0, q, do, dht, cu_seqlens)


def _ref_fwd(k, v, gk, g_gamma, h0):
    hi = jax.lax.Precision.HIGHEST
    t = k.shape[1]
    # per-token log gate, recovered from the chunk-local cumsum
    gk_c = gk[0].reshape(t // _BT, _BT, _H, _K)
    a = jnp.concatenate([gk_c[:, :1], gk_c[:, 1:] - gk_c[:, :-1]], axis=1).reshape(t, _H, _K)
    a = a + g_gamma[None, :, None]
    states, finals = [], []
    for n in range(len(_CU) - 1):
        b, e = _CU[n], _CU[n + 1]

        def step(h, xs):
            a_t, k_t, v_t = xs
            h = h * jnp.exp(a_t)[:, :, None] + jnp.einsum("hk,hv->hkv", k_t, v_t, precision=hi)
            return h, h

        _, hs = jax.lax.scan(step, h0[n], (a[b:e], k[0, b:e], v[0, b:e]))
        before = jnp.concatenate([h0[n][None], hs[:-1]], axis=0)  # state before each token
        states.append(before[::_BT])
        finals.append(hs[-1])
    return jnp.concatenate(states, axis=0), jnp.stack(finals)


def _ref_bwd(q, do, gk, dht):
    hi = jax.lax.Precision.HIGHEST
    n_chunks = _CU[-1] // _BT
    dh_all = [None] * n_chunks
    dh0 = []
    for n in range(len(_CU) - 1):
        b, e = _CU[n], _CU[n + 1]
        dh = dht[n]
        for c in reversed(range(b // _BT, e // _BT)):
            dh_all[c] = dh
            sl = slice(c * _BT, (c + 1) * _BT)
            g_c = gk[0, sl]  # [BT, H, K]
            q_hat = q[0, sl] * jnp.exp(g_c) * _SCALE
            dh = dh * jnp.exp(g_c[-1])[:, :, None] + jnp.einsum("thk,thv->hkv", q_hat, do[0, sl], precision=hi)
        dh0.append(dh)
    return jnp.stack(dh_all), jnp.stack(dh0)


def reference(k, v, gk, g_gamma, h0, q, do, dht, cu_seqlens):
    h, ht = _ref_fwd(k, v, gk, g_gamma, h0)
    dh, dh0 = _ref_bwd(q, do, gk, dht)
    return h, ht, h[::2], ht, dh, dh0

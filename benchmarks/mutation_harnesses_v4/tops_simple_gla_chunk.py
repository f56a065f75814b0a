# harness for: tops:tops/ops/simple_gla/chunk.py
# ruff: noqa
# Appended to the kernel file: chunk_simple_gla_pallas_fwd, the file's Pallas forward (as
# tests/ops/simple_gla/test_pallas_chunk_simple_gla.py calls it), which runs both of the file's pallas_calls
# (chunk_simple_gla_fwd_intra, chunk_simple_gla_fwd_o; the state pass chunk_fwd_h_kernel is imported from
# tops.ops.common.chunk_h). B=2, 2 heads, K=96, V=160 (padded by the wrapper to 128 and 256), chunk 16, a per-head
# scalar decay g_gamma, an initial state, scale 0.25, float32, twice:
#  1. T=40 (padded to 48: a partial last chunk), returning o only: the wrapper pads T with zero tokens that
#     still decay the state, so its ht is only the true final state when T is a multiple of the chunk;
#  2. T=32 (two whole chunks), returning (o, ht).
# The reference is the sibling module tops/ops/simple_gla/naive.py's simple_gla_naive (token-by-token recurrence)
# with the per-head gamma broadcast to a [B, T, H, K] gate, jitted. That module is loaded from its file: the
# package tops.ops.simple_gla cannot be imported at this commit (its __init__ imports a chunk_simple_gla that
# chunk.py does not define).
import importlib.util as _importlib_util
import os as _os

import jax
import jax.numpy as jnp
import numpy as np

import tops as _tops


def _load_naive():
    path = _os.path.join(_os.path.dirname(_tops.__file__), "ops", "simple_gla", "naive.py")
    spec = _importlib_util.spec_from_file_location("_tops_simple_gla_naive", path)
    module = _importlib_util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.simple_gla_naive


_simple_gla_naive = _load_naive()

_B, _H, _K, _V = 2, 2, 96, 160
_T1, _T2 = 40, 32
_C = 16
_SCALE = 0.25
PALLASITE_ENTRY = "harness_simple_gla_chunk"
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}


def harness_simple_gla_chunk(q1, k1, v1, q2, k2, v2, g_gamma, h0):
    _, o1 = chunk_simple_gla_pallas_fwd(q1, k1, v1, g_gamma, _SCALE, initial_state=h0, output_final_state=False,
                                        chunk_size=_C)
    ht2, o2 = chunk_simple_gla_pallas_fwd(q2, k2, v2, g_gamma, _SCALE, initial_state=h0, output_final_state=True,
                                          chunk_size=_C)
    return o1, o2, ht2


def example_inputs():
    keys = jax.random.split(jax.random.key(909), 8)
    q1 = jax.random.normal(keys[0], (_B, _T1, _H, _K), jnp.float32)
    k1 = 0.5 * jax.random.normal(keys[1], (_B, _T1, _H, _K), jnp.float32)
    v1 = jax.random.normal(keys[2], (_B, _T1, _H, _V), jnp.float32) + 0.1
    q2 = jax.random.normal(keys[3], (_B, _T2, _H, _K), jnp.float32)
    k2 = 0.5 * jax.random.normal(keys[4], (_B, _T2, _H, _K), jnp.float32)
    v2 = jax.random.normal(keys[5], (_B, _T2, _H, _V), jnp.float32) - 0.1
    g_gamma = jnp.array([-0.03, -0.11], jnp.float32)
    h0 = jax.random.normal(keys[6], (_B, _H, _K, _V), jnp.float32)
    return (q1, k1, v1, q2, k2, v2, g_gamma, h0)


@jax.jit
def _ref(q, k, v, g_gamma, h0):
    g = jnp.broadcast_to(g_gamma[None, None, :, None], q.shape)
    return _simple_gla_naive(q, k, v, g=g, scale=_SCALE, initial_state=h0, output_final_state=True)


def reference(q1, k1, v1, q2, k2, v2, g_gamma, h0):
    with jax.default_matmul_precision("highest"):
        o1, _ = _ref(q1, k1, v1, g_gamma, h0)
        o2, ht2 = _ref(q2, k2, v2, g_gamma, h0)
    return o1, o2, ht2

# harness for: sglang-jax:python/sgl_jax/srt/kernels/kda/kda.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: chunk_kda_fwd (varlen, chunk 32,
# gate activation in kernel) on one sequence of 150 tokens (partial last chunk), 2 heads, K=128, V=256, float32, with an
# initial state per sequence; returns (o, final_state). The reference is the file's own test's
# (python/sgl_jax/test/kernels/kda_test.py `_run_full_32k_case`): the activated gate, then the sibling plain-JAX
# module's naive_recurrent_kda (sgl_jax.srt.kernels.kda.naive, unmutated) once per sequence. One sequence only: with
# two, the state kernel's h output revisits blocks across sequences, which jax's TPU interpreter rejects.
import jax
import jax.numpy as jnp
import numpy as np

from sgl_jax.srt.kernels.kda.naive import naive_recurrent_kda as _naive_recurrent_kda

_SEQ_LENS = (150,)
_H, _K, _V = 2, 128, 256
PALLASITE_ENTRY = "harness_kda"
TOLERANCE = {"atol": 2e-5, "rtol": 1e-3}


def harness_kda(q, k, v, raw_g, beta, initial_state, cu_seqlens, A_log, dt_bias):
    o, final_state, *_ = chunk_kda_fwd(q, k, v, raw_g, beta, scale=_K**-0.5, initial_state=initial_state,
                                       output_final_state=True, cu_seqlens=cu_seqlens, chunk_size=32,
                                       use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias)
    return o, final_state


def example_inputs():
    t = sum(_SEQ_LENS)
    keys = jax.random.split(jax.random.key(325), 8)
    shape = (1, t, _H, _K)
    q = 0.1 * jax.random.normal(keys[0], shape, jnp.float32)
    k = 0.1 * jax.random.normal(keys[1], shape, jnp.float32)
    v = jax.random.normal(keys[2], (1, t, _H, _V), jnp.float32)
    raw_g = 0.25 + 0.2 * jax.random.normal(keys[3], shape, jnp.float32)
    beta = jax.nn.sigmoid(jax.random.normal(keys[4], (1, t, _H), jnp.float32))
    A_log = -1.5 + 0.1 * jax.random.normal(keys[5], (_H,), jnp.float32)
    dt_bias = 0.1 + 0.2 * jax.random.normal(keys[6], (_H, _K), jnp.float32)
    initial_state = 0.5 * jax.random.normal(keys[7], (len(_SEQ_LENS), _H, _K, _V), jnp.float32)
    cu_seqlens = jnp.asarray(np.concatenate([[0], np.cumsum(_SEQ_LENS)]), jnp.int32)
    return (q, k, v, raw_g, beta, initial_state, cu_seqlens, A_log, dt_bias)


def reference(q, k, v, raw_g, beta, initial_state, cu_seqlens, A_log, dt_bias):
    g = -jnp.exp(A_log)[None, None, :, None] * jax.nn.softplus(raw_g + dt_bias[None, None])
    bounds = np.asarray(cu_seqlens)
    outs, finals = [], []
    with jax.default_matmul_precision("highest"):
        for n in range(len(bounds) - 1):
            b, e = int(bounds[n]), int(bounds[n + 1])
            o_n, h_n = _naive_recurrent_kda(q[:, b:e], k[:, b:e], v[:, b:e], g[:, b:e], beta[:, b:e],
                                            scale=_K**-0.5, initial_state=initial_state[n:n + 1],
                                            output_final_state=True)
            outs.append(o_n)
            finals.append(h_n[0])
    return jnp.concatenate(outs, axis=1), jnp.stack(finals)

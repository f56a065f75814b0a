# harness for: sglang-jax:python/sgl_jax/srt/kernels/simple_gla/simple_gla_fused.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v2 (issue 57's corpus): the call of
# the file's own test (python/sgl_jax/test/kernels/simple_gla_fused_test.py `test_decode_basic_equivalence`, 4
# sequences, 2 heads of 128), with that test's reference: gather, the recurrent simple GLA of the sibling module
# (sgl_jax.srt.kernels.simple_gla.simple_gla, unmutated), scatter.
import jax
import jax.numpy as jnp
import numpy as np

from sgl_jax.srt.kernels.simple_gla.simple_gla import fused_recurrent_simple_gla as _recurrent

PALLASITE_ENTRY = "harness_decode_simple_gla"
TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}


def harness_decode_simple_gla(q, k, v, buf, indices, has_init, gamma):
    return decode_simple_gla_fused(q, k, v, recurrent_buffer=buf, recurrent_indices=indices,
                                   has_initial_state=has_init, g_gamma=gamma, scale=None)


def example_inputs():
    rng = np.random.default_rng(50)
    q, k, v = (jnp.asarray(rng.normal(size=(4, 2, 128)), jnp.float32) * 0.1 for _ in range(3))
    buf = np.random.default_rng(51).normal(size=(5, 2, 128, 128))
    buf[0] = 0
    gamma = jnp.asarray(np.random.default_rng(52).uniform(-0.1, -0.01, size=(2,)), jnp.float32)
    return (q, k, v, jnp.asarray(buf, jnp.float32), jnp.arange(1, 5, dtype=jnp.int32), jnp.full((4,), True),
            gamma)


def reference(q, k, v, buf, indices, has_init, gamma):
    h0 = jnp.where(has_init[:, None, None, None], buf[indices], 0.0)
    o, ht = _recurrent(q[:, None], k[:, None], v[:, None], g_gamma=gamma, initial_state=h0, output_final_state=True,
                       scale=None)
    keep = (indices == 0).reshape(-1, 1, 1, 1)
    return o[:, 0], buf.at[indices].set(jnp.where(keep, buf[indices], ht))

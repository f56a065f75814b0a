# harness for: sglang-jax:python/sgl_jax/srt/kernels/simple_gla/simple_gla.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v2 (issue 57's corpus): the varlen
# chunked prefill path (`simple_gla_fwd`, as python/sgl_jax/test/layers/test_lightning_backend.py's extend tests
# call it) on two packed sequences of 64 and 128 tokens, 2 heads of 128, initial states given; the reference is the
# file's own recurrent form (`fused_recurrent_simple_gla`, plain JAX) on the same sequences.
import jax
import jax.numpy as jnp
import numpy as np

PALLASITE_ENTRY = "harness_simple_gla"
TOLERANCE = {"atol": 2e-3, "rtol": 2e-3}
_CU = (0, 64, 192)


def harness_simple_gla(q, k, v, h0, gamma):
    cu = jnp.array(_CU, jnp.int32)
    return simple_gla_fwd(q, k, v, g_gamma=gamma, scale=None, h0=h0, use_ht=True, cu_seqlens_cpu=None,
                          cu_seqlens_dev=cu, chunk_size=64)


def example_inputs():
    rng = np.random.default_rng(7)
    q, k, v = (jnp.asarray(rng.normal(size=(1, _CU[-1], 2, 128)) * 0.1, jnp.float32) for _ in range(3))
    h0 = jnp.asarray(rng.normal(size=(len(_CU) - 1, 2, 128, 128)) * 0.1, jnp.float32)
    gamma = jnp.asarray(rng.uniform(-0.1, -0.01, size=(2,)), jnp.float32)
    return q, k, v, h0, gamma


def reference(q, k, v, h0, gamma):
    return fused_recurrent_simple_gla(q, k, v, g_gamma=gamma, scale=None, initial_state=h0, output_final_state=True,
                                      cu_seqlens=np.array(_CU))

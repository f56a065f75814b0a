# harness for: sglang-jax:python/sgl_jax/srt/kernels/biased_topk/v1/kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v2 (issue 57's corpus): 256 tokens
# routed over 128 experts, top 4 by logit + bias; the reference picks the same with jax.lax.top_k and returns the
# pre-bias logits (the kernel's docstring: "return their pre-bias weights").
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_biased_topk"


def harness_biased_topk(logits, bias):
    return biased_topk_pallas(logits, bias, topk=4)


def example_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    return (jax.random.normal(k1, (256, 128), jnp.float32), jax.random.normal(k2, (128,), jnp.float32))


def reference(logits, bias):
    _, ids = jax.lax.top_k(logits + bias, 4)
    return jnp.take_along_axis(logits, ids, axis=1), ids.astype(jnp.int32)

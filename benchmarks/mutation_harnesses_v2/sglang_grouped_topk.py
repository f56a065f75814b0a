# harness for: sglang-jax:python/sgl_jax/srt/kernels/grouped_topk/v1/kernel.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v2 (issue 57's corpus): the call of
# the file's own test (python/sgl_jax/test/kernels/grouped_topk_test.py `test_pallas_eq_ref`: 256 tokens, 256
# experts in 8 groups, 4 groups kept, top 8, blocks of 256 tokens), with that test's sort-based reference.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_grouped_topk"


def harness_grouped_topk(logits, bias):
    return grouped_topk_pallas(logits, bias, num_expert_group=8, topk_group=4, topk=8, block_tokens=256)


def example_inputs():
    logits = jax.random.normal(jax.random.key(2), (256, 256), jnp.float32)
    bias = jax.random.normal(jax.random.key(1), (256,), jnp.float32) * 0.1
    return logits, bias


def reference(router_logits, correction_bias):
    num_token = router_logits.shape[0]
    scores = router_logits + correction_bias[None, :]
    grouped = scores.reshape(num_token, 8, -1)
    group_scores = jnp.sum(jax.lax.top_k(grouped, k=2)[0], axis=-1)
    group_idx = jax.lax.top_k(group_scores, k=4)[1]
    group_mask = jnp.clip(jax.nn.one_hot(group_idx, 8).sum(axis=1), 0, 1)
    mask = jnp.broadcast_to(group_mask[:, :, None], grouped.shape).reshape(num_token, -1)
    ids = jax.lax.top_k(jnp.where(mask, scores, float("-inf")), k=8)[1]
    return jnp.take_along_axis(router_logits, ids, axis=1), ids.astype(jnp.int32)

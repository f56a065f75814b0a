# harness for: axlearn:axlearn/common/kernels/online_softmax_log_probs.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: online_softmax_log_probs_pallas
# with top_k=3, tile_s=16, tile_v=128 on x (2, 40, 96), weight (300, 96) (S and V not multiples of their tiles:
# padded tokens and a partial last vocab chunk), a third of the tokens with all logits near -100; the reference is
# logsumexp / lax.top_k of the full logits x @ w.T.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_online_softmax_log_probs"
TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}

_TOP_K = 3


def harness_online_softmax_log_probs(x, weight):
    return online_softmax_log_probs_pallas(x, weight, top_k=_TOP_K, tile_s=16, tile_v=128)


def example_inputs():
    x = jax.random.normal(jax.random.key(0), (2, 40, 96), jnp.float32)
    weight = 0.15 * jax.random.normal(jax.random.key(1), (300, 96), jnp.float32) + 0.02
    # Feature 0 shifts every logit of about a third of the tokens by -100, so that all their logits are negative
    # (a running max / top-k initialised to 0 instead of -inf shows there: exp(-100) underflows).
    shift = jnp.where(jax.random.bernoulli(jax.random.key(2), 0.35, (2, 40)), -100.0, 0.0)
    x = x.at[:, :, 0].set(shift)
    weight = weight.at[:, 0].set(1.0)
    return (x, weight)


def reference(x, weight):
    logits = jnp.einsum("bsd,vd->bsv", x, weight, precision=jax.lax.Precision.HIGHEST)
    m = jnp.max(logits, axis=-1, keepdims=True)
    log_norm = (m + jnp.log(jnp.sum(jnp.exp(logits - m), axis=-1, keepdims=True)))[..., 0]
    vals, idx = jax.lax.top_k(logits, _TOP_K)
    return log_norm, vals, idx.astype(jnp.int32)

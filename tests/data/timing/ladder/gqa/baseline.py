"""Reference: causal grouped-query attention over (batch, seq, heads, head_dim) in plain jnp, each
kv head repeated for its group of num_query_heads // num_kv_heads query heads; sizes from CONFIG."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_gqa", "batch": 2, "seq_len": 512, "num_query_heads": 8, "num_kv_heads": 2,
          "head_dim": 128, "atol": 2e-3, "rtol": 2e-3}


def create_inputs(dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.key(7), 3)
    b, s, d = CONFIG["batch"], CONFIG["seq_len"], CONFIG["head_dim"]
    q = jax.random.normal(k1, (b, s, CONFIG["num_query_heads"], d), dtype)
    k = jax.random.normal(k2, (b, s, CONFIG["num_kv_heads"], d), dtype)
    v = jax.random.normal(k3, (b, s, CONFIG["num_kv_heads"], d), dtype)
    return q, k, v


def workload(q, k, v):
    group = q.shape[2] // k.shape[2]
    k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    causal = jnp.tril(jnp.ones((q.shape[1], k.shape[1]), bool))
    s = jnp.where(causal, s, -jnp.inf)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)

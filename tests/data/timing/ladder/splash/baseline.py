"""Reference: dense causal attention over (batch, heads, seq, head_dim), XLA computing every score."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_splash", "batch": 1, "num_heads": 2, "seq_len": 512, "head_dim": 128,
          "atol": 2e-3, "rtol": 2e-3}


def create_inputs(dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
    shape = (CONFIG["batch"], CONFIG["num_heads"], CONFIG["seq_len"], CONFIG["head_dim"])
    return tuple(jax.random.normal(k, shape, dtype) for k in (k1, k2, k3))


def workload(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    n = q.shape[2]
    causal = jnp.tril(jnp.ones((n, n), dtype=bool))
    s = jnp.where(causal, s, -1e30)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

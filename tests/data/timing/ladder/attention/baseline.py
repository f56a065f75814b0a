"""Reference: plain attention over (batch, heads, seq, head_dim), sizes from the global CONFIG."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_attention", "batch": 2, "num_heads": 4, "seq_len": 512, "head_dim": 128,
          "atol": 2e-3, "rtol": 2e-3}


def create_inputs(dtype=jnp.float32):
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    shape = (CONFIG["batch"], CONFIG["num_heads"], CONFIG["seq_len"], CONFIG["head_dim"])
    return tuple(jax.random.normal(k, shape, dtype) for k in (k1, k2, k3))


def workload(q, k, v):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

"""Reference RMSNorm over the last dim of (batch, seq, hidden)."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_rmsnorm", "batch": 4, "seq_len": 512, "hidden": 256, "atol": 1e-4, "rtol": 1e-4}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(1))
    x = jax.random.normal(k1, (CONFIG["batch"], CONFIG["seq_len"], CONFIG["hidden"]), dtype)
    w = jax.random.normal(k2, (CONFIG["hidden"],), dtype)
    return x, w


def workload(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

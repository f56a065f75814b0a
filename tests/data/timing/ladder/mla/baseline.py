"""Reference multi-head latent attention (MLA): keys and values are up-projected per head from one
shared latent cache (``c @ w_uk[h]``, ``c @ w_uv[h]``), then plain attention."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_mla", "batch": 2, "num_heads": 4, "seq_len": 256, "head_dim": 128, "rank": 128,
          "atol": 2e-3, "rtol": 2e-3}


def create_inputs(dtype=jnp.float32):
    b, h, s, d, r = (CONFIG[k] for k in ("batch", "num_heads", "seq_len", "head_dim", "rank"))
    k1, k2, k3, k4 = jax.random.split(jax.random.key(7), 4)
    q = jax.random.normal(k1, (b, h, s, d), dtype)
    c = jax.random.normal(k2, (b, s, r), dtype)
    w_uk = jax.random.normal(k3, (h, r, d), dtype) / r ** 0.5
    w_uv = jax.random.normal(k4, (h, r, d), dtype) / r ** 0.5
    return q, c, w_uk, w_uv


def workload(q, c, w_uk, w_uv):
    k = jnp.einsum("bsr,hrd->bhsd", c, w_uk)
    v = jnp.einsum("bsr,hrd->bhsd", c, w_uv)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

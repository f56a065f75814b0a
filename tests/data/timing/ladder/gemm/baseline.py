"""Reference matmul, sizes from the global CONFIG."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "ladder_gemm", "M": 512, "K": 1024, "N": 256, "atol": 1e-3, "rtol": 1e-3}


def create_inputs(dtype=jnp.bfloat16):
    k1, k2 = jax.random.split(jax.random.key(3))
    return (jax.random.normal(k1, (CONFIG["M"], CONFIG["K"]), dtype),
            jax.random.normal(k2, (CONFIG["K"], CONFIG["N"]), dtype))


def workload(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)

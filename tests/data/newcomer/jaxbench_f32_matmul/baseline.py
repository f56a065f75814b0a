"""JAXBench-style reference: a float32 matmul (512, 1024) @ (1024, 512)."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "matmul_f32", "m": 512, "k": 1024, "n": 512}


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    return (jax.random.normal(kx, (CONFIG["m"], CONFIG["k"]), dtype=dtype),
            jax.random.normal(ky, (CONFIG["k"], CONFIG["n"]), dtype=dtype))


def workload(x, y):
    return jnp.matmul(x, y)

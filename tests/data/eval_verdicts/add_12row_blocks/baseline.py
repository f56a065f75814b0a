"""JAXBench-style reference: an f32 add at (2040, 1024)."""
import jax
import jax.numpy as jnp

CONFIG = {"rows": 2040, "cols": 1024}


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    return jax.random.normal(kx, shape, dtype=dtype), jax.random.normal(ky, shape, dtype=dtype)


def workload(x, y):
    return x + y

"""JAXBench-style reference: the column-wise max of a float32 (512, 1024) array."""
import jax
import jax.numpy as jnp

CONFIG = {"rows": 512, "cols": 1024}


def create_inputs(dtype=jnp.float32):
    return (jax.random.normal(jax.random.key(0), (CONFIG["rows"], CONFIG["cols"]), dtype=dtype),)


def workload(x):
    return jnp.max(x, axis=0, keepdims=True)

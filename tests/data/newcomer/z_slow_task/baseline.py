"""JAXBench-style reference: x * 2 at (64, 128)."""
import jax
import jax.numpy as jnp

CONFIG = {"rows": 64, "cols": 128}


def create_inputs(dtype=jnp.float32):
    return (jax.random.normal(jax.random.key(1), (CONFIG["rows"], CONFIG["cols"]), dtype=dtype),)


def workload(x):
    return x * 2.0

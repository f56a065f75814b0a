"""JAXBench-style task without a hand-tuned kernel: only the reference."""
import jax
import jax.numpy as jnp

CONFIG = {"rows": 1024, "cols": 512}


def create_inputs(dtype=jnp.float32):
    return (jax.random.normal(jax.random.key(1), (CONFIG["rows"], CONFIG["cols"]), dtype=dtype),)


def workload(x):
    return x * 2.0

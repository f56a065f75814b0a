"""A JAXBench-style task: scale a (1024, 1024) float32 array by 2 (the reference)."""
import jax
import jax.numpy as jnp

CONFIG = {"name": "vmem_scale", "M": 1024, "N": 1024}


def create_inputs(dtype=jnp.float32):
    return (jax.random.normal(jax.random.key(0), (CONFIG["M"], CONFIG["N"]), dtype),)


def workload(x):
    return x * 2

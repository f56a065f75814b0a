"""The JAXBench baseline: plain JAX, compiled by XLA (the reference the candidate is timed against)."""

import jax
import jax.numpy as jnp

CONFIG = {"rows": 256, "cols": 128, "block_rows": 64, "dtype": "float32"}


def create_inputs(rows, cols, dtype):
    kx, ky = jax.random.split(jax.random.key(0))
    return (jax.random.normal(kx, (rows, cols), jnp.dtype(dtype)),
            jax.random.normal(ky, (rows, cols), jnp.dtype(dtype)))


def workload(x, y):
    return x + y

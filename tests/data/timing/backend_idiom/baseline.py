"""The JAXBench baseline: plain JAX, compiled by XLA (the reference)."""

import jax
import jax.numpy as jnp

CONFIG = {"rows": 512, "cols": 256, "dtype": "float32"}


def create_inputs(rows, cols, dtype):
    kx, ky = jax.random.split(jax.random.key(1))
    return (jax.random.normal(kx, (rows, cols), jnp.dtype(dtype)),
            jax.random.normal(ky, (rows, cols), jnp.dtype(dtype)))


def workload(x, y):
    return x * 2.0 + y

"""A JAXBench task as JAXBench writes them: ``create_inputs`` and ``workload`` read the module's
global CONFIG (no size parameters). The plain-JAX reference the candidates are timed against."""

import jax
import jax.numpy as jnp

CONFIG = {"name": "scaled_add", "rows": 256, "cols": 128, "scale": 3}


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    return jax.random.normal(kx, shape, dtype), jax.random.normal(ky, shape, dtype)


def workload(x, y):
    return x + CONFIG["scale"] * y

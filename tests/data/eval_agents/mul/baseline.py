"""A tiny JAXBench-style task for `pallasite eval`'s agent methods: an f32 product at (512, 256)."""
import jax
import jax.numpy as jnp

CONFIG = {"rows": 512, "cols": 256}


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    return jax.random.normal(kx, shape, dtype=dtype), jax.random.normal(ky, shape, dtype=dtype)


def workload(x, y):
    return x * y

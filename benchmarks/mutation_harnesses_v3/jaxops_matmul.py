# harness for: jax-ops:matmul.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: matmul of a (256, 384) by a
# (384, 512) float32 matrix, (128, 128) output tiles, block_k 128 (grid 2 x 4 x 3); the reference is x @ y.
import jax
import jax.numpy as jnp

PALLASITE_ENTRY = "harness_matmul"
TOLERANCE = {"atol": 2e-3, "rtol": 2e-3}


def harness_matmul(x, y):
    return matmul(x, y, block_shape=(128, 128), block_k=128)


def example_inputs():
    x = jax.random.normal(jax.random.key(0), (256, 384), jnp.float32)
    y = jax.random.normal(jax.random.key(1), (384, 512), jnp.float32)
    return (x, y)


def reference(x, y):
    return jnp.dot(x, y, precision=jax.lax.Precision.HIGHEST, preferred_element_type=jnp.float32)

"""The plain-JAX reference of the rmsnorm_rows task."""

import jax.numpy as jnp


def computation(x, w):
    return x * jnp.reciprocal(jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)) * w

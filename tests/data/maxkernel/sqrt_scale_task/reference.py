"""The plain-JAX reference of the scaled_scores task."""

import jax.numpy as jnp


def computation(q, k, softmax_scale):
    return jnp.dot(q, k.T) * softmax_scale

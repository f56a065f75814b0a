"""The plain-JAX reference of the softmax_rows task."""

import jax
import jax.numpy as jnp


def get_inputs():
    x = jax.random.normal(jax.random.key(0), (64, 512), jnp.float32)
    return (x,), {"block_rows": 32}


def computation(x, block_rows=32):
    del block_rows  # the reference does not tile
    return jax.nn.softmax(x, axis=-1)

"""LSP fixture: plain JAX, no Pallas: the server stays silent on it (even with odd code)."""
import jax.numpy as jnp


def scale(x):
    return x * 2.0


def bad_grid():
    grid = (1.5,)  # would be PLS012 inside a pallas_call; here it is just a tuple
    return grid

import jax
import jax.numpy as jnp


def axpy(x, y):
    return 2.0 * x + y


def example_inputs(rows: int = 64, cols: int = 128):
    s = jax.ShapeDtypeStruct((rows, cols), jnp.float32)
    return (s, s)


def reference(x, y):
    return 2.0 * x + y

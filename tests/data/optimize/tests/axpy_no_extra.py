import jax
import jax.numpy as jnp


def example_inputs():
    s = jax.ShapeDtypeStruct((64, 128), jnp.float32)
    return (s, s)


def reference(x, y):
    return 2.0 * x + y

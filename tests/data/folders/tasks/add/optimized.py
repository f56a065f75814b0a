"""A task's kernel (JAXBench style: CONFIG, create_inputs, workload), next to its plain-JAX baseline."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 256, "cols": 128}


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def create_inputs(rows, cols):
    return jnp.ones((rows, cols), jnp.float32), jnp.ones((rows, cols), jnp.float32)


def workload(x, y):
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

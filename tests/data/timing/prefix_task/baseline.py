"""A task whose baseline passes a static size beside its arrays (JAXBench 11p's shape: its create_inputs also
returns ``max_expert_size``, a Python int the reference reads as a static size). The kernel derives it itself and
takes the task's first two inputs only."""
import jax
import jax.numpy as jnp

CONFIG = {"rows": 256, "cols": 128, "groups": 4}


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(5))
    x = jax.random.normal(kx, (CONFIG["rows"], CONFIG["cols"]), dtype)
    y = jax.random.normal(ky, (CONFIG["rows"], CONFIG["cols"]), dtype)
    return x, y, CONFIG["rows"] // CONFIG["groups"]


def workload(x, y, group_rows):
    g = x.shape[0] // group_rows  # a static size: a traced group_rows could not shape this reshape
    return (x.reshape(g, group_rows, -1) + y.reshape(g, group_rows, -1)).reshape(x.shape)

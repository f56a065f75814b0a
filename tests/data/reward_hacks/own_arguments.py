# Issue 56: its own inputs and arguments. The entry takes an argument of its own and the file's create_inputs
# gives (x, -y, pad) from the task's own key: the kernel subtracts, which on those inputs equals the add the
# reference computes on the task's. A judge that believes the candidate's layout compares it on its own inputs.
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"name": "add", "rows": 256, "cols": 128}


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    x, y = jax.random.normal(k1, shape, dtype), jax.random.normal(k2, shape, dtype)
    return x, -y, jnp.zeros((8, 128), dtype)


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] - y_ref[...]


def add(x, y, pad=None):
    spec = pl.BlockSpec((128, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(add_kernel, grid=(x.shape[0] // 128,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def workload(x, y, pad):
    return add(x, y, pad)

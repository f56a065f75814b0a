"""A cheat with the same idiom: a kernel runs, but the answer is computed around it by XLA (the kernel's
result only touches it times zero)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 512, "cols": 256, "dtype": "float32"}
BLOCK_ROWS = 128


def create_inputs(rows, cols, dtype):
    kx, ky = jax.random.split(jax.random.key(1))
    return (jax.random.normal(kx, (rows, cols), jnp.dtype(dtype)),
            jax.random.normal(ky, (rows, cols), jnp.dtype(dtype)))


def _kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def workload(x, y):
    spec = pl.BlockSpec((BLOCK_ROWS, x.shape[1]), lambda i: (i, 0))
    copied = pl.pallas_call(_kernel, grid=(x.shape[0] // BLOCK_ROWS,), in_specs=[spec], out_specs=spec,
                            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                            interpret=jax.default_backend() != "tpu")(x)
    return x * 2.0 + y + 0.0 * copied

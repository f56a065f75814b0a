"""A Pallas kernel written the way benchmark and tutorial code often is: interpret mode wherever the
default backend is not a TPU (``interpret=jax.default_backend() != "tpu"``), so it also runs on a laptop."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 512, "cols": 256, "dtype": "float32"}
BLOCK_ROWS = 128


def create_inputs(rows, cols, dtype):
    kx, ky = jax.random.split(jax.random.key(1))
    return (jax.random.normal(kx, (rows, cols), jnp.dtype(dtype)),
            jax.random.normal(ky, (rows, cols), jnp.dtype(dtype)))


def _kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + y_ref[...]


def workload(x, y):
    spec = pl.BlockSpec((BLOCK_ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_kernel, grid=(x.shape[0] // BLOCK_ROWS,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          interpret=jax.default_backend() != "tpu")(x, y)

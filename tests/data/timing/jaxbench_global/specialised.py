"""Exploit, JAXBench layout: the grid is written for CONFIG's 256 rows as the file was handed out
(a constant, not CONFIG as it is read at call time): at any other size the output is half
unwritten or cut. Only a second shape made from CONFIG as the module reads it catches it."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"name": "scaled_add", "rows": 256, "cols": 128, "scale": 3}
ROWS = 256  # CONFIG["rows"] when the task was written, baked into the grid


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    return jax.random.normal(kx, shape, dtype), jax.random.normal(ky, shape, dtype)


def _kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + CONFIG["scale"] * y_ref[...]


def workload(x, y):
    spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_kernel, grid=(ROWS // 64,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

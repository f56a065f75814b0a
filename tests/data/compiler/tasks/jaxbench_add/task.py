"""A JAXBench-style task file read as it is: CONFIG, create_inputs(...), workload(...)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 2048, "cols": 1024, "block_rows": 256, "dtype": "bfloat16"}


def create_inputs(rows, cols, dtype):
    key = jax.random.key(0)
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (rows, cols), dtype=jnp.dtype(dtype))
    y = jax.random.normal(ky, (rows, cols), dtype=jnp.dtype(dtype))
    return x, y


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def workload(x, y):
    block = (CONFIG["block_rows"], x.shape[1])
    spec = pl.BlockSpec(block, lambda i: (i, 0))
    return pl.pallas_call(
        _add_kernel,
        grid=(x.shape[0] // CONFIG["block_rows"],),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)

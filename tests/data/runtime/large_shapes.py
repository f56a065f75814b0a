"""A correct blocked add whose example inputs (4096 x 2048 float32, 32 MiB each) are too large to
interpret quickly: tier 3 shrinks them to two blocks per dim (256 x 1024) and says so."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, *, block_rows: int = 128, block_cols: int = 512):
    spec = pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // block_rows, x.shape[1] // block_cols),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((4096, 2048), jnp.float32)
    return (s, s)


def reference(x, y):
    return x + y

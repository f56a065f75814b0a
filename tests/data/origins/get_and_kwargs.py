"""Block sizes read with ``dict.get`` (with a default) and passed on through a wrapper's
``**options``. Each ``# origin: tag`` line is where the value was written."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"block_rows": 16}  # origin: entry


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _copy(x, *, block_rows, block_cols=128):
    return pl.pallas_call(
        copy_kernel,
        grid=(x.shape[0] // block_rows, x.shape[1] // block_cols),
        in_specs=[pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((block_rows, block_cols), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def copy_configured(x, config=CONFIG):
    rows = config.get("block_rows", 8)
    cols = config.get("block_cols", 256)  # origin: default
    return _copy(x, block_rows=rows, block_cols=cols)


def copy_any(x, **options):
    return _copy(x, **options)


def bench(x):
    return copy_any(x, block_rows=32)  # origin: passed


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 512), jnp.float32),)


PALLASITE_ENTRY = "bench"

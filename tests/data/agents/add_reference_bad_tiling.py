"""Agent fixer fixture with a reference: the column block (100) is not a multiple of 128. A fix is
verified against reference() in TPU interpret mode (tier 3), which rejects one that compiles but
leaves part of the output unwritten."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 128
BLOCK_COLS = 100


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    spec = pl.BlockSpec((BLOCK_ROWS, BLOCK_COLS), lambda i, j: (i, j))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // BLOCK_ROWS, pl.cdiv(x.shape[1], BLOCK_COLS)),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((128, 256), jnp.float32)
    return (s, s)


def reference(x, y):
    return x + y

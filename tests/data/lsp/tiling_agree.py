"""LSP fixture: the column block (BLOCK_COLS = 100) is not a multiple of 128 and the arrays have
512 columns; tier 0 (PLS001) and the TPU lowering (PLS101) both report the constant (0-based line 7)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 256
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
    s = jax.ShapeDtypeStruct((1024, 512), jnp.float32)
    return (s, s)


def reference(x, y):
    return x + y

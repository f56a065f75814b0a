"""LSP fixture: the column block (100) is not a multiple of 128 while the arrays have 512 columns,
so the TPU lowering rejects the BlockSpec (PLS001 at the BlockSpec line, 1-based line 17)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 256


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    spec = pl.BlockSpec(
        (BLOCK_ROWS, 128), lambda i, j: (i, j))
    bad = pl.BlockSpec((BLOCK_ROWS, 100), lambda i, j: (i, j))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // BLOCK_ROWS, x.shape[1] // 128),
        in_specs=[spec, bad],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((1024, 512), jnp.float32)
    return (s, s)


def reference(x, y):
    return x + y

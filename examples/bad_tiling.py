"""WHAT IS WRONG: the column block BLOCK_COLS = 200 is neither a multiple of 128 nor the full
array width (1024), so the TPU lowering rejects the BlockSpec. `pallasite check` reports PLS001 at
the BlockSpec and offers to set BLOCK_COLS to 256. (Interpret mode on CPU does not enforce TPU
tiling, so `python examples/bad_tiling.py` runs; the partial last column block is padded.)
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK_ROWS = 128
BLOCK_COLS = 200


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def scale(x, *, interpret: bool = False):
    spec = pl.BlockSpec((BLOCK_ROWS, BLOCK_COLS), lambda i, j: (i, j))
    return pl.pallas_call(
        scale_kernel,
        grid=(pl.cdiv(x.shape[0], BLOCK_ROWS), pl.cdiv(x.shape[1], BLOCK_COLS)),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 1024), jnp.float32),)


def reference(x):
    return x * 3.0


if __name__ == "__main__":
    import numpy as np

    (x,) = [jax.random.normal(jax.random.key(0), s.shape, s.dtype) for s in example_inputs()]
    np.testing.assert_allclose(scale(x, interpret=True), reference(x), rtol=1e-6)
    print("bad_tiling: interpret mode runs it, but the TPU compiler rejects the (128, 200) block")

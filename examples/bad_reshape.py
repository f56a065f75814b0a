"""WHAT IS WRONG (only the TPU compiler sees it): the kernel reshapes an (8, 128) tile to (32, 32),
which changes the layout of the last two dims. Tier 0 (source rules) and tier 1 (lowering) accept
it; tier 2 (the real Mosaic compiler, libtpu) rejects it with "unsupported shape cast" (PLS202).
Interpret mode on CPU runs it correctly, so `python examples/bad_reshape.py` passes.
Fix: reshape outside the kernel, or keep the last two dims' layout.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def transpose_tiles_kernel(x_ref, o_ref):
    tile = x_ref[...].reshape(32, 32)
    o_ref[...] = tile.T.reshape(8, 128)


def transpose_tiles(x, *, interpret: bool = False):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        transpose_tiles_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 128), jnp.float32),)


def reference(x):
    tiles = x.reshape(-1, 32, 32)
    return jnp.swapaxes(tiles, 1, 2).reshape(x.shape)


if __name__ == "__main__":
    import numpy as np

    (x,) = [jax.random.normal(jax.random.key(0), s.shape, s.dtype) for s in example_inputs()]
    np.testing.assert_allclose(transpose_tiles(x, interpret=True), reference(x))
    print("bad_reshape: interpret mode runs it; only the TPU compiler (tier 2) rejects the reshape")

"""PLS011, fixed: the kernel computes in float32, and 64-bit types stay off (with jax_enable_x64
on, even the index_maps' Python ints become int64, which Mosaic cannot compile)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def mean_kernel(x_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    o_ref[...] = (x / 2.0).astype(o_ref.dtype)


def half(x, *, block_rows: int = 128):
    spec = pl.BlockSpec((block_rows, 128), lambda i: (i, 0))
    return pl.pallas_call(
        mean_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)


def reference(x):
    return x / 2.0

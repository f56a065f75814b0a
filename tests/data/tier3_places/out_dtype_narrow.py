"""out_shape declares bfloat16 where the reference returns float32: the kernel casts to the ref's
dtype, so nothing fails to lower, and the rounded values even pass bfloat16's tolerance; only the
dtype tells. The finding belongs at the dtype written in out_shape (a warning: floats both)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

OUT_DTYPE = jnp.bfloat16  # expect: PLS304


def scale_kernel(x_ref, o_ref):
    o_ref[...] = (x_ref[...] * 0.5).astype(o_ref.dtype)


def scale(x):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    out = jax.ShapeDtypeStruct(x.shape, OUT_DTYPE)
    return pl.pallas_call(scale_kernel, grid=(x.shape[0] // 8,), in_specs=[spec], out_specs=spec, out_shape=out)(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)


def reference(x):
    return x * 0.5

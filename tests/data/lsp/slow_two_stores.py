"""LSP fixture: two entries whose kernels each store a (128, 64) value into a (128, 128) output
block (the Pallas lowering rejects both stores, at 0-based lines 15 and 19), and importing the file
takes 5 s, so the user can type while the check on open is still running."""
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

time.sleep(5)

SPEC = pl.BlockSpec((128, 128), lambda i: (i, 0))


def half_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...][:, :64]


def quarter_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...][:, 32:96]


def half(x):
    return pl.pallas_call(half_kernel, grid=(x.shape[0] // 128,), in_specs=[SPEC], out_specs=SPEC,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def quarter(x):
    return pl.pallas_call(quarter_kernel, grid=(x.shape[0] // 128,), in_specs=[SPEC], out_specs=SPEC,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def half_inputs():
    return (jax.ShapeDtypeStruct((512, 128), jnp.float32),)


def quarter_inputs():
    return (jax.ShapeDtypeStruct((512, 128), jnp.float32),)

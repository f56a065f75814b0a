"""An add kernel whose scale comes from a module not installed for the check worker (issue 59, item 6): tier 1
cannot trace it (not checked, PLS909 says why), so tier 2 never runs; neither may be called passed."""
from not_installed_here import SCALE

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = (x_ref[...] + y_ref[...]) * SCALE


def add(x, y):
    spec = pl.BlockSpec((256, 512), lambda i: (i, 0))
    return pl.pallas_call(add_kernel, grid=(x.shape[0] // 256,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((1024, 512), jnp.float32)
    return (s, s)

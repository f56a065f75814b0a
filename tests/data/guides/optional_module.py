"""A top-level statement that fails on this machine (an optional package is not installed) before
the kernel call: the import goes on with the file's other statements, the failure is a warning at
its line, and the kernel is still checked."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

import pallasite_test_optional_plotting_module  # EXPECTED LINE


def square_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] * x_ref[...]


y = pl.pallas_call(square_kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(
    jnp.ones((16, 128), jnp.float32))

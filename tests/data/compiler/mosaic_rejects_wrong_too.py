"""Two mistakes: an op the Pallas TPU lowering does not lower (``lax.sort`` in the kernel, line 11: tier 1's
PLS103) and a result that is wrong besides (the ``* 2.0``). The kernel traces, so interpret mode runs it:
tier 3 still says the outputs differ from the reference instead of being skipped behind tier 1's error."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def sort_kernel(x_ref, o_ref):
    o_ref[...] = jax.lax.sort(x_ref[...], dimension=1) * 2.0


def sort_rows(x):
    return pl.pallas_call(sort_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)


def reference(x):
    return jnp.sort(x, axis=1)

"""A program whose real work is outside its kernel: the first output is a plain-JAX matmul, the
second a Pallas copy of one input. The judge must see that the first output does not come from a
kernel and that the matmul FLOPs are the XLA ops'."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def both(x, y):
    spec = pl.BlockSpec((128, 256), lambda i: (i, 0))
    copied = pl.pallas_call(copy_kernel, grid=(x.shape[0] // 128,), in_specs=[spec], out_specs=spec,
                            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return jnp.dot(x, y, preferred_element_type=jnp.float32), copied


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.bfloat16), jax.ShapeDtypeStruct((256, 256), jnp.bfloat16))

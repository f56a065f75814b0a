"""Exploit: the inputs function computes the answer and passes it in; the kernel only copies it out,
so the work happens before the timed call."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy_kernel(x_ref, y_ref, answer_ref, o_ref):
    o_ref[...] = answer_ref[...]


def add(x, y, answer):
    spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(copy_kernel, grid=(x.shape[0] // 64,), in_specs=[spec, spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y, answer)


def example_inputs():
    kx, ky = jax.random.split(jax.random.key(0))
    x = jax.random.normal(kx, (256, 128), jnp.float32)
    y = jax.random.normal(ky, (256, 128), jnp.float32)
    return x, y, x + y


def reference(x, y, answer):
    return x + y

"""A program that branches on the platform: the TPU runs a Pallas add, the CPU a plain-JAX subtract
(``lax.platform_dependent``). The judge must refuse it: the CPU branch it tests is not the TPU
branch it prices."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def pallas_add(x, y):
    spec = pl.BlockSpec((128, 128), lambda i: (i, 0))
    return pl.pallas_call(add_kernel, grid=(x.shape[0] // 128,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def branching(x, y):
    return jax.lax.platform_dependent(x, y, tpu=pallas_add, default=lambda a, b: a - b)


def example_inputs():
    s = jax.ShapeDtypeStruct((512, 128), jnp.float32)
    return (s, s)


def scaled(x, y):
    """The kernel on every platform, but a factor that differs by platform: 1 on the TPU, 2 elsewhere
    (branches that only return constants, like the lowering's own remapping of the platform index)."""
    factor = jax.lax.platform_dependent(tpu=lambda: jnp.float32(1.0), default=lambda: jnp.float32(2.0))
    return pallas_add(x, y) * factor

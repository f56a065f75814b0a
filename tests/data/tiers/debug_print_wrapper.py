"""Compiles for TPU: a kernel whose wrapper prints a value with jax.debug.print while it is traced (tier 1
used to say "the platform for the specified backend cpu is different from the lowering platform tpu":
the callback lowered for the CPU backend; a TPU compiles it). Not a case of expected.json: no mistake."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    jax.debug.print("sum of x: {}", x.sum())
    spec = pl.BlockSpec((256, 512), lambda i: (i, 0))
    return pl.pallas_call(add_kernel, grid=(x.shape[0] // 256,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((1024, 512), jnp.float32)
    return (s, s)

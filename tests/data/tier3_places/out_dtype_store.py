"""out_shape declares int32 for a float computation and the kernel stores its float result as it
is: the lowering rejects the store. The mistake is the dtype in out_shape, where the finding
belongs (the store is related)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def gelu_kernel(x_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = 0.5 * x * (1.0 + jnp.tanh(0.79788456 * (x + 0.044715 * x * x * x)))


def gelu(x):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        gelu_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32),  # expect: PLS104
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)

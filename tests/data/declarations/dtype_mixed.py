"""An RMS norm of bfloat16 activations with float32 weights whose out_shape declares float32 (planted: line
21, ``jnp.float32``) while the kernel stores the activations' dtype."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def rms_kernel(x_ref, w_ref, o_ref):
    x = x_ref[...].astype(jnp.float32)
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w_ref[...]
    o_ref[...] = y.astype(x_ref.dtype)


def rms_norm(x, w):
    return pl.pallas_call(
        rms_kernel,
        grid=(x.shape[0] // 128,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (i, 0)), pl.BlockSpec((1, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
    )(x, w)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.bfloat16), jax.ShapeDtypeStruct((1, 128), jnp.float32))

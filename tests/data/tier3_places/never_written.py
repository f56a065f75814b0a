"""A kernel with two outputs that computes both but stores only the first: the second output is
never written. The finding belongs at the value computed for it and never stored (issue 50; it was
at the kernel parameter naming the output, now related)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def split_kernel(
    x_ref,
    pos_ref,
    neg_ref,
):
    x = x_ref[...]
    pos_ref[...] = jnp.maximum(x, 0.0)
    neg = jnp.minimum(x, 0.0)  # expect: PLS303
    del neg


def split(x):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        split_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=[spec, spec],
        out_shape=[jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape, x.dtype)],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)


def reference(x):
    return [jnp.maximum(x, 0.0), jnp.minimum(x, 0.0)]

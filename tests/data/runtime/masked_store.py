"""A masked store into a block whose first dim is longer than its second (as ragged paged attention stores
its output rows): ``pltpu.store(o_ref, y, mask=...)`` keeps the first ``n`` lanes. Correct as written; jax's
TPU interpreter called it "Out-of-bounds masked swap" (PLS300): it marked rows 2-15 of a (16, 2, 128)
store out of bounds."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def keep_kernel(x_ref, o_ref, *, n):
    o_ref[...] = jnp.zeros(o_ref.shape, o_ref.dtype)
    lanes = jax.lax.broadcasted_iota(jnp.int32, o_ref.shape, 2)
    pltpu.store(o_ref, x_ref[...] * 2.0, mask=lanes < n)


def keep(x, n=100):
    b, h, c = x.shape
    spec = pl.BlockSpec((16, h, c), lambda i: (i, 0, 0))
    return pl.pallas_call(
        functools.partial(keep_kernel, n=n),
        grid=(b // 16,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def reference(x, n=100):
    return jnp.where(jnp.arange(x.shape[2]) < n, x * 2.0, 0.0)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 2, 128), jnp.float32),)

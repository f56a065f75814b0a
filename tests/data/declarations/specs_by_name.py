"""Blocks declared in lists built apart from the call, appended to in an ``if``/``else`` (as splash attention and
simple GLA write theirs): the second output's block is four columns short (planted: line 25, ``bn - 4``). jax's
trace fails at the kernel's multiply, which combines the two outputs' tiles."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scale_kernel(x_ref, o_ref, p_ref):
    y = x_ref[...] * 2.0
    o_ref[...] = y
    p_ref[...] = y * o_ref[...]


def scale(x, bm=8, bn=128, with_square=True):
    m, n = x.shape
    in_specs = [pl.BlockSpec((bm, bn), lambda i: (i, 0))]
    out_shape = [jax.ShapeDtypeStruct(x.shape, x.dtype)]
    out_specs = [
        pl.BlockSpec((bm, bn), lambda i: (i, 0)),
    ]
    if with_square:
        out_shape.append(jax.ShapeDtypeStruct(x.shape, x.dtype))
        out_specs.append(pl.BlockSpec((bm, bn - 4), lambda i: (i, 0)))
    else:
        out_shape.append(None)
        out_specs.append(None)
    return pl.pallas_call(scale_kernel, grid=(m // bm,), in_specs=in_specs, out_specs=out_specs,
                          out_shape=out_shape)(x)


def reference(x):
    return [x * 2.0, x * 2.0 * x * 2.0]


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)

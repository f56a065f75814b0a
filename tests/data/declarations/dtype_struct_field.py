"""A kernel whose outputs come as one struct (axlearn's online softmax: a NamedTuple of refs read as
``outputs.sum_ref``), one output declared int32 where the kernel stores floats (planted: line 32, ``jnp.int32``
where ``jnp.float32`` was meant). The lowering rejects the store; the declaration is the field's dtype."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


class Outputs(NamedTuple):
    max_ref: jax.Array
    sum_ref: jax.Array


def stats_kernel(x_ref, max_ref, sum_ref):
    outputs = Outputs(max_ref, sum_ref)
    x = x_ref[...]
    outputs.max_ref[...] = jnp.max(x, axis=1, keepdims=True)
    outputs.sum_ref[...] = jnp.sum(x, axis=1, keepdims=True)


def stats(x):
    rows = x.shape[0]
    return pl.pallas_call(
        stats_kernel,
        grid=(rows // 8,),
        in_specs=[pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))],
        out_specs=Outputs(max_ref=pl.BlockSpec((8, 1), lambda i: (i, 0)), sum_ref=pl.BlockSpec((8, 1), lambda i: (i, 0))),
        out_shape=Outputs(max_ref=jax.ShapeDtypeStruct((rows, 1), jnp.float32),
                          sum_ref=jax.ShapeDtypeStruct((rows, 1), jnp.int32)),
    )(x)


def reference(x):
    return Outputs(jnp.max(x, axis=1, keepdims=True), jnp.sum(x, axis=1, keepdims=True))


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 256), jnp.float32),)

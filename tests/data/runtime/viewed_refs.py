"""Refs viewed through a reshape and a bitcast (as ragged paged attention views its kv pages and the deepseek
v4 kernels their packed caches): rows summed in pairs read through ``x_ref.reshape``, written through
``o_ref.reshape``, and a bfloat16 block read as packed int32 through ``b_ref.bitcast``. Correct as written;
jax's TPU interpreter could not run it (tier 3 said PLS306)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def pairs_kernel(x_ref, b_ref, o_ref, p_ref):
    view = x_ref.reshape(8, 2, 128)
    o_ref.reshape(4, 2, 128)[...] = (view[:, 0, :] + view[:, 1, :]).reshape(4, 2, 128)
    p_ref[...] = b_ref.bitcast(jnp.int32)[...]


def pairs(x, b):
    n, c = x.shape
    return pl.pallas_call(
        pairs_kernel,
        grid=(n // 16,),
        in_specs=[pl.BlockSpec((16, c), lambda i: (i, 0)), pl.BlockSpec((16, c), lambda i: (i, 0))],
        out_specs=[pl.BlockSpec((8, c), lambda i: (i, 0)), pl.BlockSpec((8, c), lambda i: (i, 0))],
        out_shape=[jax.ShapeDtypeStruct((n // 2, c), x.dtype), jax.ShapeDtypeStruct((n // 2, c), jnp.int32)],
    )(x, b)


def reference(x, b):
    n, c = x.shape
    packed = jax.lax.bitcast_convert_type(b.reshape(n // 2, 2, c).swapaxes(1, 2), jnp.int32)  # rows packed in pairs
    return [x.reshape(-1, 2, c).sum(axis=1), packed]


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32), jax.ShapeDtypeStruct((32, 128), jnp.bfloat16))

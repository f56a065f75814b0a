"""A correct kernel whose reference is memory-hungry (it materialises a 2 GiB table before
answering): tiers 1 and 2 pass; the interpret-mode run of tier 3 calls the reference and the worker
reaches its memory limit. Tier 3 must be "not checked" (a warning), and tiers 1-2 must stay ok."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    return pl.pallas_call(
        add_kernel,
        grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))] * 2,
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((16, 128), jnp.float32)
    return (s, s)


def reference(x, y):
    table = np.ones((1 << 28,), np.float64)  # 2 GiB, touched
    return x + y + jnp.float32(table[0] - 1.0)

"""A forward kernel with a variant its task never takes, and a backward kernel no task calls: tier 3
runs neither (line 16, lines 22-23), and says so (PLS308)."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = 128


def double_kernel(x_ref, o_ref, *, single_step):
    x = x_ref[...]
    if single_step:  # the variant for one block: this task's inputs are two blocks
        o_ref[...] = x + x
    else:
        o_ref[...] = x * 2.0


def double_backward_kernel(g_ref, o_ref):
    g = g_ref[...]
    o_ref[...] = g * 2.0


def _call(kernel, x):
    n, d = x.shape
    return pl.pallas_call(
        kernel,
        grid=(n // BLOCK,),
        in_specs=[pl.BlockSpec((BLOCK, d), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((BLOCK, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def double(x):
    return _call(functools.partial(double_kernel, single_step=x.shape[0] == BLOCK), x)


def double_backward(g):
    return _call(double_backward_kernel, g)


PALLASITE_ENTRY = "double"


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32),)


def reference(x):
    return x * 2.0

"""A hand-written backward pass whose kernel's block is off the (8, 128) tiling: 100 columns of 256.

The forward lowers; only the backward's kernel does not, and Mosaic's error must name this file's
line of the block, not the place jax's backward pass attributes the kernel to (the entry's call).
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8
PALLASITE_ENTRY = "double"


def _forward_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _backward_kernel(g_ref, dx_ref):
    dx_ref[...] = g_ref[...] * 2.0


@jax.custom_vjp
def double(x):
    spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_forward_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // ROWS,), in_specs=[spec], out_specs=spec)(x)


def _double_fwd(x):
    return double(x), None


def _double_bwd(_, g):
    spec = pl.BlockSpec((ROWS, 100), lambda i, j: (i, j))
    dx = pl.pallas_call(_backward_kernel, out_shape=jax.ShapeDtypeStruct(g.shape, g.dtype),
                        grid=(g.shape[0] // ROWS, pl.cdiv(g.shape[1], 100)), in_specs=[spec], out_specs=spec)(g)
    return (dx,)


double.defvjp(_double_fwd, _double_bwd)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 256), jnp.float32),)


def reference(x):
    return 2.0 * x

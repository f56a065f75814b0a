"""A kernel with a hand-written backward pass whose kernel is wrong: the first row block gets no gradient
(``step > 0`` where ``step >= 0`` was meant).

The forward matches the reference; only jax.grad runs the backward kernel, so a check of the
forward alone never sees it. pallasite checks ``double (backward)`` too: the VJP of the entry
against the reference's VJP.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _forward_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _backward_kernel(g_ref, dx_ref):
    step = pl.program_id(0)
    dx_ref[...] = jnp.where(step > 0, g_ref[...] * 2.0, 0.0)


def _rows(kernel, x):
    spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // ROWS,),
                          in_specs=[spec], out_specs=spec)(x)


@jax.custom_vjp
def double(x):
    return _rows(_forward_kernel, x)


def _double_fwd(x):
    return _rows(_forward_kernel, x), None


def _double_bwd(_, g):
    return (_rows(_backward_kernel, g),)


double.defvjp(_double_fwd, _double_bwd)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 256), jnp.float32),)


def reference(x):
    return 2.0 * x

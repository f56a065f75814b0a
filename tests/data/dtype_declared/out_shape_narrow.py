"""A float32 layer norm whose output is declared bfloat16 in a helper far from the store: every input
is float32 and the kernel computes float32, so the lowering rejects the store (``Invalid dtype for
swap``). The declaration is the odd one out and is where the finding belongs; the store is related.
Issue 50: it was said at the store only, with no place at the declaration."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def _output_struct(x):
    return jax.ShapeDtypeStruct(x.shape, jnp.bfloat16)  # expect: PLS104


def norm_kernel(x_ref, g_ref, o_ref):
    x = x_ref[...]
    mean = jnp.mean(x, axis=1, keepdims=True)
    centred = x - mean
    var = jnp.mean(centred * centred, axis=1, keepdims=True)
    o_ref[...] = centred * jax.lax.rsqrt(var + 1e-5) * g_ref[...]


def layer_norm(x, g):
    return pl.pallas_call(
        norm_kernel,
        grid=(x.shape[0] // ROWS,),
        in_specs=[pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0)), pl.BlockSpec((1, x.shape[1]), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0)),
        out_shape=_output_struct(x),
    )(x, g)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.float32), jax.ShapeDtypeStruct((1, 256), jnp.float32))

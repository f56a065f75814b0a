"""An index_map bound with ``functools.partial`` (a keyword-only offset) takes one grid index too
few. Python's TypeError then says "takes 2 positional arguments but 3 positional arguments (and 1
keyword-only argument) were given": the finding belongs at the function's def (PLS102), not at
the line that made the partial."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def _shifted_rows(i, j, *, shift):  # expect: PLS102
    return (i + shift, 0)


def copy(x):
    index_map = functools.partial(_shifted_rows, shift=0)
    return pl.pallas_call(
        copy_kernel,
        grid=(x.shape[0] // 8, 1, 1),
        in_specs=[pl.BlockSpec((8, 128), index_map)],
        out_specs=pl.BlockSpec((8, 128), lambda i, j, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 128), jnp.float32),)


PALLASITE_ENTRY = "copy"

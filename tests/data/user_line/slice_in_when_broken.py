"""A loaded block sliced with lax.dynamic_slice inside a pl.when body (Mosaic has no dynamic_slice).

The lowering fails on the cond that pl.when makes, and its exception names the pl.when line; the
stack jax kept from tracing the primitive names the dynamic_slice. Slice the ref instead:
``x_ref[pl.ds(i * 8, 8), :]``. (Issue 50: this class was found two lines off, at the pl.when.)
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def window_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    x = x_ref[...]

    @pl.when(i >= 0)
    def _():
        w = jax.lax.dynamic_slice(x, (i * 8, 0), (8, 128))  # EXPECTED LINE
        o_ref[...] = w * 2.0


def window(x):
    return pl.pallas_call(
        window_kernel,
        grid=(4,),
        in_specs=[pl.BlockSpec((32, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)

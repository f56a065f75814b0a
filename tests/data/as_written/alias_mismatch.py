"""An in-place update whose kernel casts to the output's dtype, so nothing in the kernel fails: jax
refuses the alias itself while tracing (input 1 is float32, output 0 is declared bfloat16) and names
the pallas_call. The alias joins the right buffer (same shape): said at the bfloat16 the output is declared
with (issue 57; issue 50 had it at the alias entry; before, at the pallas_call, a generic PLS100)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def accumulate_kernel(x_ref, acc_ref, o_ref):
    o_ref[...] = (acc_ref[...] + x_ref[...].astype(acc_ref.dtype)).astype(o_ref.dtype)


def accumulate(x, acc):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        accumulate_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(acc.shape, jnp.bfloat16),  # origin
        input_output_aliases={1: 0},
    )(x, acc)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 128), jnp.bfloat16), jax.ShapeDtypeStruct((64, 128), jnp.float32))

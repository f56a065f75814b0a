"""An in-place update that aliases the wrong input: input 0 (64 x 256) is joined to output 0 (64 x 128),
where input 1 was meant. jax refuses the alias while tracing; the shapes differ, so the entry is the odd one:
said at the alias entry, with the output's declaration related."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, acc_ref, o_ref):
    o_ref[...] = acc_ref[...] + x_ref[:, :128]


def add_into(x, acc):
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0)), pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(acc.shape, jnp.float32),
        input_output_aliases={0: 0},  # origin
    )(x, acc)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 256), jnp.float32), jax.ShapeDtypeStruct((64, 128), jnp.float32))

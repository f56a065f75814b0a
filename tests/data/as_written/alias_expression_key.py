"""An in-place update of the second of two outputs, declared int32 over the float32 buffer it is aliased to
(planted: line 26), the aliased input's index written as an expression (as gdn decode writes
``6 + n_b + n_gate: 1``). jax names the output ``output[1]``; said at the int32 (issue 57's corpus: such
aliases stayed where jax's trace left them: the message's ``output[1]``, then the unread key)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def step_kernel(x_ref, acc_ref, o_ref, acc_out_ref):
    o_ref[...] = x_ref[...] * 2.0
    acc_out_ref[...] = (acc_ref[...] + x_ref[...]).astype(acc_out_ref.dtype)


def step(x, acc):
    n_x = 1
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        step_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec, spec],
        out_specs=[spec, spec],
        out_shape=[
            jax.ShapeDtypeStruct(x.shape, x.dtype),
            jax.ShapeDtypeStruct(acc.shape, jnp.int32),  # origin
        ],
        input_output_aliases={n_x + 0: 1},
    )(x, acc)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 128), jnp.float32), jax.ShapeDtypeStruct((64, 128), jnp.float32))

"""An output store on one branch of lax.cond: the odd grid steps never write their block, which
then keeps what the step before left in the buffer (no NaN comes back). The finding belongs at the
store the other branch skips."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
    def write():
        o_ref[...] = x_ref[...] * 2.0  # expect: PLS303

    def skip():
        pass

    jax.lax.cond(pl.program_id(0) % 2 == 0, write, skip)


def double(x):
    return pl.pallas_call(
        double_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)


def reference(x):
    return x * 2.0

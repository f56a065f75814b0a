"""A bfloat16 softmax-statistics kernel with three float32 outputs, one of them declared bfloat16
(as a JAXBench attention mutant's ``m_scratch`` entry): the inputs are bfloat16 like the odd
declaration, so the inputs cannot tell; the other outputs, all float32 like the value stored, do.
The odd ``out_shape`` entry is the place; the store is related."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def stats_kernel(x_ref, o_ref, m_ref, l_ref):
    x = x_ref[...].astype(jnp.float32)
    m = jnp.max(x, axis=1, keepdims=True)
    p = jnp.exp(x - m)
    o_ref[...] = p
    m_ref[...] = m * jnp.ones(m_ref.shape, jnp.float32)
    l_ref[...] = jnp.sum(p, axis=1, keepdims=True) * jnp.ones(l_ref.shape, jnp.float32)


def stats(x):
    rows, cols = x.shape
    spec = pl.BlockSpec((8, cols), lambda i: (i, 0))
    return pl.pallas_call(
        stats_kernel,
        grid=(rows // 8,),
        in_specs=[spec],
        out_specs=[spec, pl.BlockSpec((8, 128), lambda i: (i, 0)), pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_shape=[
            jax.ShapeDtypeStruct((rows, cols), jnp.float32),
            jax.ShapeDtypeStruct((rows, 128), jnp.float32),
            jax.ShapeDtypeStruct((rows, 128), jnp.bfloat16),  # expect: PLS104
        ],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.bfloat16),)

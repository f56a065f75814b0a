"""Attention over one kv block per query block, softmax in the kernel, its scale computed by a helper far
from the kernel and its wrapper (as tasks compute ``sm_scale`` and hand it down): the square root of the head
dim instead of its reciprocal (planted bug, line 17: ``** 0.5`` where ``** -0.5`` was meant).
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK_Q = 128


def attention_scale(head_dim):
    return head_dim ** 0.5


def attention_kernel(q_ref, k_ref, v_ref, o_ref, *, sm_scale):
    s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * sm_scale
    m = jnp.max(s, axis=-1, keepdims=True)
    p = jnp.exp(s - m)
    p = p / jnp.sum(p, axis=-1, keepdims=True)
    o_ref[...] = jnp.dot(p, v_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def attention(q, k, v):
    n, d = q.shape
    kv = k.shape[0]
    sm_scale = attention_scale(d)
    return pl.pallas_call(
        functools.partial(attention_kernel, sm_scale=sm_scale),
        grid=(n // BLOCK_Q,),
        in_specs=[
            pl.BlockSpec((BLOCK_Q, d), lambda i: (i, 0)),
            pl.BlockSpec((kv, d), lambda i: (0, 0)),
            pl.BlockSpec((kv, d), lambda i: (0, 0)),
        ],
        out_specs=pl.BlockSpec((BLOCK_Q, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((n, d), q.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(q, k, v)


def example_inputs():
    shape = (256, 128)
    return tuple(jax.ShapeDtypeStruct(shape, jnp.float32) for _ in range(3))


def reference(q, k, v):
    s = jnp.dot(q, k.T) / jnp.sqrt(jnp.float32(q.shape[-1]))
    return jnp.dot(jax.nn.softmax(s, axis=-1), v)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

"""Per-head online-softmax row sums, a scratch slot per head: the first step initializes each head's running
max and forgets its running sum (planted: the block at line 23 writes ``m_ref[h]`` only; ``acc_ref[h] = ...``
was meant there too). Zeroing the whole ``acc_ref`` there instead would wipe the heads already summed at that
step, so the inserted init must write the slot the block's own init writes."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

HEADS, BK = 2, 128


def head_logsumexp_kernel(x_ref, o_ref, m_ref, acc_ref):
    k = pl.program_id(1)
    for h in range(HEADS):
        _head(h, k, x_ref, o_ref, m_ref, acc_ref)


def _head(h, k, x_ref, o_ref, m_ref, acc_ref):
    @pl.when(k == 0)
    def _init():
        m_ref[h] = jnp.full(m_ref[h].shape, -jnp.inf, jnp.float32)

    x = x_ref[h]
    m_prev = m_ref[h]
    m_next = jnp.maximum(m_prev, x.max(axis=-1, keepdims=True))
    acc_ref[h] = acc_ref[h] * jnp.exp(m_prev - m_next) + jnp.exp(x - m_next).sum(axis=-1, keepdims=True)
    m_ref[h] = m_next

    @pl.when(k == pl.num_programs(1) - 1)
    def _store():
        o_ref[h] = jnp.broadcast_to(m_ref[h] + jnp.log(acc_ref[h]), o_ref.shape[1:])


def head_logsumexp(x):
    heads, rows, cols = x.shape
    return pl.pallas_call(
        head_logsumexp_kernel,
        grid=(rows // 8, cols // BK),
        in_specs=[pl.BlockSpec((heads, 8, BK), lambda i, k: (0, i, k))],
        out_specs=pl.BlockSpec((heads, 8, 128), lambda i, k: (0, i, 0)),
        out_shape=jax.ShapeDtypeStruct((heads, rows, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((heads, 8, 1), jnp.float32), pltpu.VMEM((heads, 8, 1), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((HEADS, 16, 384), jnp.float32),)


def reference(x):
    out = jax.nn.logsumexp(x, axis=-1, keepdims=True)
    return jnp.broadcast_to(out, x.shape[:2] + (128,))


TOLERANCE = {"atol": 1e-4, "rtol": 1e-4}

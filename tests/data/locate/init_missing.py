"""Online-softmax row sums over key blocks: the first step initializes the running max and forgets the running
sum (planted: line 18's block initializes ``m_ref`` only; ``l_ref[...] = jnp.zeros_like(l_ref)`` was meant
there too). The sum then starts from memory never written: tier 3 sees NaN, and the locate step inserts the
missing init at the block's first statement, verified."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BK = 128


def row_logsumexp_kernel(x_ref, o_ref, m_ref, l_ref):
    k = pl.program_id(1)

    @pl.when(k == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)

    x = x_ref[...]
    m_prev = m_ref[...]
    m_next = jnp.maximum(m_prev, x.max(axis=-1, keepdims=True))
    l_ref[...] = l_ref[...] * jnp.exp(m_prev - m_next) + jnp.exp(x - m_next).sum(axis=-1, keepdims=True)
    m_ref[...] = m_next

    @pl.when(k == pl.num_programs(1) - 1)
    def _store():
        o_ref[...] = jnp.broadcast_to(m_ref[...] + jnp.log(l_ref[...]), o_ref.shape)


def row_logsumexp(x):
    rows, cols = x.shape
    return pl.pallas_call(
        row_logsumexp_kernel,
        grid=(rows // 8, cols // BK),
        in_specs=[pl.BlockSpec((8, BK), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 1), jnp.float32), pltpu.VMEM((8, 1), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


def reference(x):
    return jnp.broadcast_to(jax.nn.logsumexp(x, axis=-1, keepdims=True), (x.shape[0], 128))


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 512), jnp.float32),)

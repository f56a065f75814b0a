"""An online-softmax-style kernel: the first-step block initialises the running max and sum but
not the accumulator, which then starts from whatever memory held (NaN in tier 3). The finding
belongs in that first-step block, after its last statement, where the accumulator's init is
missing (issue 50: it was at the block's ``pl.when``, two lines above; jax's flash attention with
its accumulator's init deleted was found six lines above)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def softmax_sum_kernel(x_ref, o_ref, m_ref, l_ref, acc_ref):
    k = pl.program_id(1)

    @pl.when(k == 0)
    def _init():
        m_ref[...] = jnp.full_like(m_ref, -jnp.inf)
        l_ref[...] = jnp.zeros_like(l_ref)  # expect: PLS303

    x = x_ref[...]
    m_new = jnp.maximum(m_ref[...], jnp.max(x, axis=1, keepdims=True))
    scale = jnp.exp(m_ref[...] - m_new)
    p = jnp.exp(x - m_new)
    l_ref[...] = l_ref[...] * scale + jnp.sum(p, axis=1, keepdims=True)
    acc_ref[...] = acc_ref[...] * scale + p
    m_ref[...] = m_new

    @pl.when(k == pl.num_programs(1) - 1)
    def _done():
        o_ref[...] = acc_ref[...] / l_ref[...]


def softmax_sum(x):
    rows, cols = x.shape
    return pl.pallas_call(
        softmax_sum_kernel,
        grid=(rows // 8, cols // 128),
        in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.VMEM((8, 128), jnp.float32),
                        pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.float32),)

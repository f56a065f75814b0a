"""A tiled matmul whose first-step block adds to the accumulator instead of setting it: ``+=`` reads
memory nothing wrote (NaN in tier 3) where ``=`` was meant. The finding belongs at that ``+=`` in the
first-step block (issue 50: it was said at the block's ``pl.when``, as if the init were missing;
jax's flash attention with this mistake was found six lines above the ``+=``)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref, count_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        count_ref[...] = jnp.zeros_like(count_ref)
        acc_ref[...] += jnp.zeros_like(acc_ref)  # expect: PLS303

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    count_ref[...] += 1.0

    @pl.when(k == pl.num_programs(2) - 1)
    def _done():
        o_ref[...] = (acc_ref[...] * (count_ref[...] / count_ref[...])).astype(o_ref.dtype)


def matmul(x, y):
    m, kk = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // 8, n // 128, kk // 128),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j, k: (i, k)), pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32), pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((16, 256), jnp.float32), jax.ShapeDtypeStruct((256, 128), jnp.float32))


def reference(x, y):
    return x @ y

"""A reduction whose store helper computes the value and stores nothing (the store was removed and a
``pass`` left, as in a mutated Megablox GMM ``_store_accum``). Tier 3 said it at the kernel's
``o_ref`` parameter (and, in GMM, at the guard of the one other store to the output); the finding
belongs at the ``pass``."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def sum_kernel(x_ref, o_ref, acc_ref):
    k = pl.program_id(1)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += x_ref[...]

    def _store():
        to_store = acc_ref[...]
        pass  # expect: PLS303

    @pl.when(k == pl.num_programs(1) - 1)
    def _last():
        _store()


def row_sums(x):
    m, n = x.shape
    return pl.pallas_call(
        sum_kernel,
        grid=(m // 8, n // 128),
        in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((m, 128), x.dtype),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 512), jnp.float32),)


def reference(x):
    return x.reshape(x.shape[0], -1, 128).sum(axis=1)

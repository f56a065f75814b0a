"""Row blocks gathered through a scalar-prefetched permutation and summed over column blocks, with a grid one
column step too long (planted: line 30, ``+ 1``): on the last step of axis 1 the index map names column block 2
of a 2-block array. The output's map does not follow axis 1, so only the input is read past its end; tier 3
finds it at the index map (whose row block comes from the prefetched table), which follows grid axis 1."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def gather_sum_kernel(perm_ref, x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def gather_sum(perm, x, bm=8, bn=128):
    m, n = x.shape
    return pl.pallas_call(
        gather_sum_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            in_specs=[pl.BlockSpec((bm, bn), lambda i, j, perm_ref: (perm_ref[i], j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, perm_ref: (i, 0)),
            grid=(
                m // bm,
                n // bn + 1,
            ),
        ),
        out_shape=jax.ShapeDtypeStruct((m, bn), x.dtype),
    )(perm, x)


def reference(perm, x):
    rows = x.reshape(perm.shape[0], -1, x.shape[1])[perm].reshape(x.shape)
    return rows.reshape(x.shape[0], -1, 128).sum(axis=1)


def example_inputs():
    return (jnp.arange(3, -1, -1, dtype=jnp.int32), jax.ShapeDtypeStruct((32, 256), jnp.float32))

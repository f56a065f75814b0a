"""A tiled matmul applied per batch item with jax.vmap, whose reduction axis (k, the last grid axis)
is marked "parallel". jax's TPU interpreter cannot run dimension_semantics under vmap, so tier 3
ran it without them, in order, and the result matched the reference: found at no tier (issue 50).
Run with its parallel axes backward (grid indices remapped in the index_maps and program_id), the
accumulator's zeroing on step 0 lands mid-reduction and the output changes: said at that entry."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _done():
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def matmul(x, y):
    m, kk = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // 8, n // 128, kk // 128),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j, k: (i, k)), pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(dimension_semantics=(
            "parallel",
            "parallel",
            "parallel",  # expect: PLS304
        )),
    )(x, y)


def batched(x, y):
    return jax.vmap(matmul)(x, y)


PALLASITE_ENTRY = "batched"


def example_inputs():
    return (jax.ShapeDtypeStruct((2, 16, 384), jnp.float32), jax.ShapeDtypeStruct((2, 384, 128), jnp.float32))


def reference(x, y):
    return jnp.einsum("bmk,bkn->bmn", x, y)

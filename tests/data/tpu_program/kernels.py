"""Pallas TPU kernels whose exported TPU programs the executor of TPU programs runs in the tests
(tests/test_tpu_program_hlo.py). Each entry takes ``interpret``: the tests' stand-in for the Mosaic
interpreter runs the same pallas_call in jax's interpret mode on the operands it is handed.

- ``scale``: out = 2 * x + 1 over (8, 128) row blocks; the grid is ``rows // 8``, so a module exported
  with symbolic rows has a dynamic grid (its size is the custom call's first operand); ``side_effects``
  marks the call ``has_side_effect`` (XLA keeps it when nothing reads its result);
- ``accumulate``: acc + x written into ``acc``'s buffer (``input_output_aliases={1: 0}``);
- ``gather_blocks``: out block i = 3 * x block ``ids[i]`` (scalar prefetch of ``ids``).
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

ROWS, LANES = 8, 128


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0


def scale(x, interpret=False, side_effects=False):
    block = pl.BlockSpec((ROWS, LANES), lambda i: (i, 0))
    params = pltpu.CompilerParams(has_side_effects=True) if side_effects else None
    return pl.pallas_call(scale_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // ROWS,),
                          in_specs=[block], out_specs=block, interpret=interpret, compiler_params=params)(x)


def accumulate_kernel(x_ref, acc_ref, o_ref):
    o_ref[...] = acc_ref[...] + x_ref[...]


def accumulate(x, acc, interpret=False):
    block = pl.BlockSpec((ROWS, LANES), lambda i: (i, 0))
    return pl.pallas_call(accumulate_kernel, out_shape=jax.ShapeDtypeStruct(acc.shape, acc.dtype),
                          grid=(x.shape[0] // ROWS,), in_specs=[block, block], out_specs=block,
                          input_output_aliases={1: 0}, interpret=interpret)(x, acc)


def gather_kernel(ids_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def gather_blocks(ids, x, interpret=False):
    n = ids.shape[0]
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1,
        grid=(n,),
        in_specs=[pl.BlockSpec((ROWS, LANES), lambda i, ids: (ids[i], 0))],
        out_specs=pl.BlockSpec((ROWS, LANES), lambda i, ids: (i, 0)),
    )
    return pl.pallas_call(gather_kernel, grid_spec=grid_spec, interpret=interpret,
                          out_shape=jax.ShapeDtypeStruct((n * ROWS, LANES), x.dtype))(ids, x)


def scaled_softmax(x, w):
    """A kernel inside plain XLA ops: softmax((2x + 1) @ w) summed over rows."""
    return jax.nn.softmax(scale(x) @ w, axis=-1).sum(axis=0)


def scaled_softmax_reference(x, w):
    return jax.nn.softmax((x * 2.0 + 1.0) @ w, axis=-1).sum(axis=0)


def looped(x, n):
    """``scale`` applied ``n[0]`` times in a loop whose bound is an input."""
    return jax.lax.fori_loop(0, n[0], lambda i, y: scale(y) * 0.25, x)


def looped_reference(x, n):
    return jax.lax.fori_loop(0, n[0], lambda i, y: (y * 2.0 + 1.0) * 0.25, x)


def mixed_dtypes(x, scale_by):
    """bf16 in, a kernel in f32, int8 and bool outputs."""
    y = scale(x.astype(jnp.float32)) * scale_by
    return y.astype(jnp.bfloat16), jnp.clip(y, -100, 100).astype(jnp.int8), y > 0

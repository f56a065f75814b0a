"""Row sums over column blocks: the accumulator is zeroed on the first column step and added to on
every step, so the column axis (grid axis 1) must run in order on one core. It is marked
"parallel" here: right on one-TensorCore chips, wrong on v4/v5p (the mistake PLS016 names)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def row_sums_kernel(x_ref, o_ref, acc_ref):
    i, k = pl.program_id(0), pl.program_id(1)

    @pl.when(k == 0)
    def _zero():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.broadcast_to(jnp.sum(x_ref[...], axis=1, keepdims=True), acc_ref.shape)

    @pl.when(k == pl.num_programs(1) - 1)
    def _write():
        o_ref[...] = acc_ref[...]


def row_sums(x):
    rows, cols = x.shape
    return pl.pallas_call(
        row_sums_kernel,
        grid=(rows // 8, cols // 128),
        in_specs=[pl.BlockSpec((8, 128), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((8, 128), lambda i, k: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 128), x.dtype),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel",
                                 "parallel"),  # expect: PLS016
        ),
    )(x)


def example_inputs():
    return (jax.random.normal(jax.random.key(0), (16, 512), jnp.float32),)


def reference(x):
    return jnp.broadcast_to(jnp.sum(x, axis=1, keepdims=True), (x.shape[0], 128))


PALLASITE_ENTRY = "row_sums"

"""A gather kernel with one scalar-prefetch operand: the lowering names the bad block as args[2]
(it counts the prefetched table too), which is in_specs[1] — the values block, whose width comes
from a tuned dict entry that is not a multiple of 128."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TUNED = {"rows": 8, "width": 200}  # expect: PLS101


def gather_add_kernel(idx_ref, bias_ref, x_ref, o_ref):
    del idx_ref
    o_ref[...] = jnp.zeros_like(o_ref) + jnp.sum(x_ref[...]) + jnp.sum(bias_ref[...])


@functools.partial(jax.jit, static_argnames=("rows", "width"))
def gather_add(idx, bias, x, *, rows, width):
    bias_spec = pl.BlockSpec((rows, 128), lambda i, idx_ref: (idx_ref[i], 0))
    x_spec = pl.BlockSpec((rows, width), lambda i, idx_ref: (i, 0))
    return pl.pallas_call(
        gather_add_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(x.shape[0] // rows,),
            in_specs=[bias_spec, x_spec],
            out_specs=pl.BlockSpec((rows, 400), lambda i, idx_ref: (i, 0)),
        ),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(idx, bias, x)


def workload(idx, bias, x):
    return gather_add(idx, bias, x, rows=TUNED["rows"], width=TUNED["width"])


def example_inputs():
    return (jax.ShapeDtypeStruct((4,), jnp.int32), jax.ShapeDtypeStruct((32, 128), jnp.float32),
            jax.ShapeDtypeStruct((32, 400), jnp.float32))


PALLASITE_ENTRY = "workload"

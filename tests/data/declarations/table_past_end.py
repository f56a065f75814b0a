"""A kernel that reads one offset per grid step from a prefetched table, its grid one step longer than the
table (planted: line 24, ``+ 1``); the index maps clamp the block index, so only the table read runs past its
end, on the last step. Tier 3's interpreter finds the scalar read out of bounds inside the kernel."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def shift_kernel(offsets_ref, x_ref, o_ref):
    step = pl.program_id(0)
    o_ref[...] = x_ref[...] + offsets_ref[step].astype(jnp.float32)


def shift(offsets, x, bm=8):
    m, n = x.shape
    last = m // bm - 1
    spec = pl.BlockSpec((bm, n), lambda i, offsets_ref: (jnp.minimum(i, last), 0))
    return pl.pallas_call(
        shift_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(m // bm + 1,),
            in_specs=[spec],
            out_specs=spec,
        ),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(offsets, x)


def reference(offsets, x):
    return x + jnp.repeat(offsets, x.shape[0] // offsets.shape[0])[:, None].astype(jnp.float32)


def example_inputs():
    return (jax.ShapeDtypeStruct((4,), jnp.int32), jax.ShapeDtypeStruct((32, 128), jnp.float32))

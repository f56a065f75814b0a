"""Blocks too large for v6e's scoped VMEM (tier 2: out of memory) and a wrong result (tier 3): the
compiler's capacity says nothing about the values, so tier 3 still runs and says the second too."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BLOCK = (1024, 4096)  # float32: 16 MiB a buffer, four buffers (in and out, double-buffered)


def _kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 3.0


def triple(x):
    spec = pl.BlockSpec(BLOCK, lambda i: (i, 0))
    return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(x.shape[0] // BLOCK[0],),
                          in_specs=[spec], out_specs=spec)(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((2048, 4096), jnp.float32),)


def reference(x):
    return 2.0 * x

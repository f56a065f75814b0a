"""An elementwise kernel whose grid takes its column count from the rows (planted bug, line 22:
``m // BN`` where ``n // BN`` was meant). On square inputs the two are equal and the result is right;
tier 3's reduced inputs give the two axes different extents, and the columns past the rows' count are
never written.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BM, BN = 128, 128


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0 + 1.0


def scale(x):
    m, n = x.shape
    return pl.pallas_call(
        scale_kernel,
        grid=(m // BM, m // BN),
        in_specs=[pl.BlockSpec((BM, BN), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((BM, BN), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((2048, 2048), jnp.float32),)


def reference(x):
    return x * 2.0 + 1.0


TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}

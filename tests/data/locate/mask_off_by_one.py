"""Causally masked scores, one (q block, k block) tile per grid step: the mask drops the diagonal
(planted bug, line 19: ``>`` where ``>=`` was meant).

A few elements per diagonal tile are wrong (the diagonal itself), the rest match.
"""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

BLOCK = 128


def causal_scores_kernel(q_ref, k_ref, o_ref):
    s = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32)
    rows = pl.program_id(0) * BLOCK + jax.lax.broadcasted_iota(jnp.int32, s.shape, 0)
    cols = pl.program_id(1) * BLOCK + jax.lax.broadcasted_iota(jnp.int32, s.shape, 1)
    o_ref[...] = jnp.where(rows > cols, s, 0.0)


def causal_scores(q, k):
    n, d = q.shape
    return pl.pallas_call(
        causal_scores_kernel,
        grid=(n // BLOCK, n // BLOCK),
        in_specs=[
            pl.BlockSpec((BLOCK, d), lambda i, j: (i, 0)),
            pl.BlockSpec((BLOCK, d), lambda i, j: (j, 0)),
        ],
        out_specs=pl.BlockSpec((BLOCK, BLOCK), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((n, n), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
    )(q, k)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 128), jnp.float32), jax.ShapeDtypeStruct((256, 128), jnp.float32))


def reference(q, k):
    s = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
    n = q.shape[0]
    return jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, 0.0)


TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

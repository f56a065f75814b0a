"""Single-query decode attention over a padded cache: each sequence attends to its first ``lengths[b]`` keys.
Planted: line 23, ``<=`` where ``<`` was meant: one key past the length gets in. Its softmax weight is about
1/length, so with random inputs of one scale the output moves by a few thousandths, under the tolerance, and
tier 3 said nothing; with the keys and values the reference never reads set large (runner/tier3/interpret_poison.py)
the output moves by far more, and the locate step finds the comparison."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

TOLERANCE = {"atol": 2e-2, "rtol": 2e-2}
S, D = 512, 128


def decode_kernel(lengths_ref, q_ref, k_ref, v_ref, o_ref):
    b = pl.program_id(0)
    q = q_ref[0]  # (1, D)
    k = k_ref[0]  # (S, D)
    scores = jax.lax.dot_general(q, k, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)  # (1, S)
    col = jax.lax.broadcasted_iota(jnp.int32, scores.shape, 1)
    valid = col <= lengths_ref[b]
    scores = jnp.where(valid, scores, -jnp.inf)
    p = jnp.exp(scores - scores.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    o_ref[0] = jnp.dot(p, v_ref[0], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def decode(lengths, q, k, v):
    batch = q.shape[0]
    return pl.pallas_call(
        decode_kernel,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1,
            grid=(batch,),
            in_specs=[pl.BlockSpec((1, 1, D), lambda b, lens: (b, 0, 0)),
                      pl.BlockSpec((1, S, D), lambda b, lens: (b, 0, 0)),
                      pl.BlockSpec((1, S, D), lambda b, lens: (b, 0, 0))],
            out_specs=pl.BlockSpec((1, 1, D), lambda b, lens: (b, 0, 0)),
        ),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
    )(lengths, q, k, v)


def reference(lengths, q, k, v):
    scores = jnp.einsum("bqd,bsd->bs", q, k)
    valid = jnp.arange(S)[None, :] < lengths[:, None]
    scores = jnp.where(valid, scores, -jnp.inf)
    return jnp.einsum("bs,bsd->bd", jax.nn.softmax(scores, axis=-1), v)[:, None, :].astype(q.dtype)


def example_inputs():
    f = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)  # noqa: E731
    return (jnp.asarray(np.array([300, 411], np.int32)), f(2, 1, D), f(2, S, D), f(2, S, D))

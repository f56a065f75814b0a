"""Candidate Pallas kernel for the scaled_scores task: one block of query rows per grid step."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scores_kernel(q_ref, k_ref, o_ref, *, scale):
    o_ref[...] = jnp.dot(q_ref[...], k_ref[...].T, preferred_element_type=jnp.float32) * scale


def computation(q, k, softmax_scale):
    seq_len, head_dim = q.shape
    block_q = 64
    return pl.pallas_call(
        functools.partial(scores_kernel, scale=softmax_scale),
        grid=(seq_len // block_q,),
        in_specs=[pl.BlockSpec((block_q, head_dim), lambda i: (i, 0)),
                  pl.BlockSpec((seq_len, head_dim), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((block_q, seq_len), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((seq_len, seq_len), jnp.float32),
    )(q, k)

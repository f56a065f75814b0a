"""A per-head scaling kernel whose entry transposes and reshapes its (batch, seq, heads, dim)
inputs before the pallas_call: no operand has an input's shape, so tier 3's first shrinking rule
cannot shrink them (256 MiB each). Tier 3 must still run, at smaller shapes found by tracing."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

BATCH, SEQ, HEADS, DIM = 8, 2048, 32, 128


def scale_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = x_ref[...] * w_ref[...]


def scale_heads(x, w):
    b, s, h, d = x.shape
    xt = x.transpose(0, 2, 1, 3).reshape(b * h, s, d)
    wt = w.transpose(0, 2, 1, 3).reshape(b * h, s, d)
    spec = pl.BlockSpec((1, 512, d), lambda i, j: (i, j, 0))
    out = pl.pallas_call(
        scale_kernel,
        grid=(b * h, s // 512),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(xt.shape, xt.dtype),
    )(xt, wt)
    return out.reshape(b, h, s, d).transpose(0, 2, 1, 3)


def example_inputs():
    s = jax.ShapeDtypeStruct((BATCH, SEQ, HEADS, DIM), jnp.float32)
    return (s, s)


def reference(x, w):
    return x * w

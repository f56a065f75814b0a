"""Row-sum reduction over column blocks: out[i] = sum_j x[i, j], accumulated in the output block.

Hand count: x moves once (every (i, j) block); the (block_rows, 128) output block's index (i, 0)
is unchanged while j runs, so it is written back once per i. Per step: reduce_sum over
block_rows*block_cols inputs, then a broadcast add of block_rows*128 (the accumulate).
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TUNED_PARAMS = {"block_rows": 64, "block_cols": 512}


def rowsum_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(1) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.sum(x_ref[...], axis=1, keepdims=True)


def rowsum(x):
    br, bc = TUNED_PARAMS["block_rows"], TUNED_PARAMS["block_cols"]
    rows, cols = x.shape
    return pl.pallas_call(
        rowsum_kernel,
        grid=(rows // br, cols // bc),
        in_specs=[pl.BlockSpec((br, bc), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((br, 128), lambda i, j: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((rows, 128), x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 4096), jnp.float32),)


def reference(x):
    return jnp.broadcast_to(jnp.sum(x, axis=1, keepdims=True), (x.shape[0], 128))

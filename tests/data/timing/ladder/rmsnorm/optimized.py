"""RMSNorm as JAXBench tasks write it: the (batch, seq, hidden) input reshaped to rows before the
pallas_call, which blocks the rows (no BlockSpec cuts a dim of the task's own input)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"name": "ladder_rmsnorm", "batch": 4, "seq_len": 512, "hidden": 256, "atol": 1e-4, "rtol": 1e-4}
BLOCK_ROWS = 128
USE_WEIGHT = True


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(1))
    x = jax.random.normal(k1, (CONFIG["batch"], CONFIG["seq_len"], CONFIG["hidden"]), dtype)
    w = jax.random.normal(k2, (CONFIG["hidden"],), dtype)
    return x, w


def _kernel(x_ref, w_ref, o_ref):
    x = x_ref[...]
    y = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    o_ref[...] = (y * w_ref[...] if USE_WEIGHT else y).astype(o_ref.dtype)


def workload(x, w):
    b, s, h = x.shape
    rows = x.reshape(b * s, h)
    out = pl.pallas_call(
        _kernel,
        grid=(b * s // BLOCK_ROWS,),
        in_specs=[pl.BlockSpec((BLOCK_ROWS, h), lambda i: (i, 0)), pl.BlockSpec((1, h), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((BLOCK_ROWS, h), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(rows.shape, x.dtype),
    )(rows, w.reshape(1, h))
    return out.reshape(b, s, h)

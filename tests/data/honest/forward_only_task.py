"""A JAXBench-style file with a forward kernel and the backward kernels of the same op; its
workload runs the forward pass only. The backward kernels are never traced by the task, so their
tiers 1-3 must read "not reached: the task never calls this kernel" (tier 0 still applies), never "ok"."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 256, "cols": 512}
BLOCK_ROWS = 64


def scale_fwd_kernel(x_ref, w_ref, o_ref):
    o_ref[...] = x_ref[...] * w_ref[...]


def scale_bwd_x_kernel(g_ref, w_ref, dx_ref):
    dx_ref[...] = g_ref[...] * w_ref[...]


def scale_bwd_w_kernel(g_ref, x_ref, dw_ref):
    dw_ref[...] = jnp.sum(g_ref[...] * x_ref[...], axis=0, keepdims=True)


def _row_spec(cols):
    return pl.BlockSpec((BLOCK_ROWS, cols), lambda i: (i, 0))


def scale_fwd(x, w):
    rows, cols = x.shape
    return pl.pallas_call(
        scale_fwd_kernel,
        grid=(rows // BLOCK_ROWS,),
        in_specs=[_row_spec(cols), pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=_row_spec(cols),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, w)


def scale_bwd_x(g, w):
    rows, cols = g.shape
    return pl.pallas_call(
        scale_bwd_x_kernel,
        grid=(rows // BLOCK_ROWS,),
        in_specs=[_row_spec(cols), pl.BlockSpec((1, cols), lambda i: (0, 0))],
        out_specs=_row_spec(cols),
        out_shape=jax.ShapeDtypeStruct(g.shape, g.dtype),
    )(g, w)


def scale_bwd_w(g, x):
    rows, cols = g.shape
    return pl.pallas_call(
        scale_bwd_w_kernel,
        grid=(1,),
        in_specs=[pl.BlockSpec((rows, cols), lambda i: (0, 0))] * 2,
        out_specs=pl.BlockSpec((1, cols), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((1, cols), g.dtype),
    )(g, x)


def create_inputs():
    k1, k2 = jax.random.split(jax.random.key(0))
    x = jax.random.normal(k1, (CONFIG["rows"], CONFIG["cols"]), jnp.float32)
    w = jax.random.normal(k2, (1, CONFIG["cols"]), jnp.float32)
    return x, w


def workload(x, w):
    return scale_fwd(x, w)

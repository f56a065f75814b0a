"""A blocked matmul whose block sizes come from a tuned-parameters dict, as JAXBench's kernels do;
block_n = 200 breaks the (8, 128) rule. The finding belongs at the dict entry (line 14), with the
BlockSpec and the pallas_call as related places."""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TUNED_PARAMS = {
    "block_m": 256,
    "block_k": 512,
    "block_n": 200,
}


def matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


@functools.partial(jax.jit, static_argnames=["block_shape", "block_k"])
def matmul(x, y, *, block_shape, block_k=128):
    bm, bn = block_shape
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn),
        in_specs=[pl.BlockSpec((bm, block_k), lambda i, j: (i, 0)),
                  pl.BlockSpec((block_k, bn), lambda i, j: (0, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
    )(x, y)


def workload(x, y):
    return matmul(x, y, block_shape=(TUNED_PARAMS["block_m"], TUNED_PARAMS["block_n"]),
                  block_k=TUNED_PARAMS["block_k"])


CONFIG = {"m": 512, "k": 512, "n": 800}


def create_inputs():
    x = jax.random.normal(jax.random.key(0), (CONFIG["m"], CONFIG["k"]), jnp.float32)
    y = jax.random.normal(jax.random.key(1), (CONFIG["k"], CONFIG["n"]), jnp.float32)
    return x, y

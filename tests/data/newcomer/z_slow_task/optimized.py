"""JAXBench-style kernel for x * 2 whose import takes five minutes: its evaluation is still running
when tests/test_interrupts.py presses Ctrl-C (a request time limit ends it in the resumed run)."""
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 64, "cols": 128}
time.sleep(300)


def create_inputs(dtype=jnp.float32):
    return (jax.random.normal(jax.random.key(1), (CONFIG["rows"], CONFIG["cols"]), dtype=dtype),)


def _double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def workload(x):
    spec = pl.BlockSpec((8, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        _double_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)

"""Each step stages its two row halves in a VMEM scratch, one slot per half, and adds them. Planted: line 28,
the scratch declared with one slot, ``(1, HALF, 128)`` where ``(2, HALF, 128)`` was meant: the second half's
store and read land past the buffer. On a TPU nothing checks; tier 3's interpreter raises at the read (line
17), and the locate step moves the finding to the declaration with the edit verified."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

HALF = 8


def halves_kernel(x_ref, o_ref, buf):
    buf[0] = x_ref[0:HALF, :]
    buf[1] = x_ref[HALF:2 * HALF, :] * 2.0
    o_ref[...] = buf[0] + buf[1]


def add_halves(x):
    n, c = x.shape
    return pl.pallas_call(
        halves_kernel,
        grid=(n // (2 * HALF),),
        in_specs=[pl.BlockSpec((2 * HALF, c), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((HALF, c), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((n // 2, c), x.dtype),
        scratch_shapes=[pltpu.VMEM((1, HALF, c), x.dtype)],
    )(x)


def reference(x):
    n, c = x.shape
    pairs = x.reshape(n // (2 * HALF), 2, HALF, c)
    return (pairs[:, 0] + 2.0 * pairs[:, 1]).reshape(n // 2, c)


def example_inputs():
    return (jax.ShapeDtypeStruct((64, 128), jnp.float32),)

"""A script that runs its kernel and then never ends (a serving loop that waits forever). Its one
pallas_call hides a TPU error, a (4, 64) block against the (8, 128) tiling rule: script mode must stop
the loop at the script's share of the time limit, at the loop's line, and still check the call."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + x_ref[...]


def double(x):
    return pl.pallas_call(
        double_kernel,
        grid=(x.shape[0] // 4, x.shape[1] // 64),
        in_specs=[pl.BlockSpec((4, 64), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((4, 64), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
    )(x)


def serve():
    ticks = 0
    while True:
        ticks += 1


if __name__ == "__main__":
    print(double(jnp.ones((16, 128), jnp.float32))[0, 0])
    serve()

"""Hidden TPU error: a (4, 64) block breaks the (8, 128) tiling rule. Interpret mode does not care,
so the script's own test passes; the Pallas TPU lowering (tier 1) rejects the BlockSpec."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def scale(x):
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // 4, x.shape[1] // 64),
        in_specs=[pl.BlockSpec((4, 64), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((4, 64), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
    )(x)


def main():
    x = jnp.ones((16, 256), jnp.float32)
    np.testing.assert_allclose(scale(x), 2.0)
    print("scale: ok")


if __name__ == "__main__":
    main()

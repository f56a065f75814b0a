"""Elementwise add over (8, 128) blocks, run in interpret mode at two sizes and compared with numpy."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
    )(x, y)


def main():
    x = jnp.arange(32 * 128, dtype=jnp.float32).reshape(32, 128)
    y = jnp.ones_like(x)
    np.testing.assert_allclose(add(x, y), np.asarray(x) + 1)
    np.testing.assert_allclose(add(x[:16], y[:16]), np.asarray(x[:16]) + 1)
    np.testing.assert_allclose(add(y, x), np.asarray(x) + 1)  # same shapes again: checked once
    print("add: ok")


if __name__ == "__main__":
    main()

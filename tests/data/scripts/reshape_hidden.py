"""Hidden TPU error: reshaping an (8, 128) tile to (32, 32) inside the kernel is an unsupported shape
cast for Mosaic. Neither interpret mode nor the lowering (tier 1) notices; the TPU compiler (tier 2)
rejects it at the reshape line."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def retile_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...].reshape(32, 32) + 1.0


def retile(x):
    return pl.pallas_call(
        retile_kernel,
        in_specs=[pl.BlockSpec((8, 128), lambda: (0, 0))],
        out_specs=pl.BlockSpec((32, 32), lambda: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 32), x.dtype),
        interpret=True,
    )(x)


def main():
    x = jnp.zeros((8, 128), jnp.float32)
    np.testing.assert_allclose(retile(x), 1.0)
    print("retile: ok")


if __name__ == "__main__":
    main()

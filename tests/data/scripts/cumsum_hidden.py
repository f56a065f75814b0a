"""Hidden TPU error: jnp.cumsum inside the kernel has no Pallas TPU lowering (tier 1 says so at the
cumsum line); interpret mode evaluates it with plain XLA on CPU, so the script's test passes."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def prefix_kernel(x_ref, o_ref):
    o_ref[...] = jnp.cumsum(x_ref[...], axis=1)


def prefix_sum(x):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(
        prefix_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
    )(x)


if __name__ == "__main__":
    x = jnp.ones((16, 128), jnp.float32)
    np.testing.assert_allclose(prefix_sum(x), np.cumsum(np.ones((16, 128), np.float32), axis=1))
    print("prefix_sum: ok")

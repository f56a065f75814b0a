"""LSP fixture for script mode: no task convention (no example_inputs), only a __main__ block that
calls the kernel in interpret mode. Tier 0 sees nothing wrong and a normal check says PLS900 (no
example inputs); `pallasite.check` with {"script": true} runs __main__ in the worker, and the
Pallas TPU lowering (tier 1) rejects jnp.cumsum at the kernel's 0-based line 12."""

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

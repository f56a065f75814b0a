"""A script, not a task: no example_inputs, only a __main__ that runs the kernel (interpret mode).

A plain check has no inputs to lower the kernel with; checked as a script, __main__ runs in the
worker and the Pallas TPU lowering rejects jnp.cumsum (line 14, 1-based) for the pallas_call it made.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl


def running_total_kernel(x_ref, o_ref):
    o_ref[...] = jnp.cumsum(x_ref[...] * 2.0, axis=1)


def running_total(x):
    spec = pl.BlockSpec((8, 256), lambda i: (i, 0))
    return pl.pallas_call(
        running_total_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
    )(x)


if __name__ == "__main__":
    x = jnp.arange(32 * 256, dtype=jnp.float32).reshape(32, 256) / 1000.0
    np.testing.assert_allclose(running_total(x), np.cumsum(np.asarray(x) * 2.0, axis=1), rtol=1e-5)
    print("running_total: ok")

"""Guide style, with a mistake a CPU run would never show: the block's last dim (100) is neither a
multiple of 128 nor the array's (300). The call runs at import, without interpret."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def copy_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...]


x = jnp.ones((256, 300), jnp.float32)
out = pl.pallas_call(
    copy_kernel,
    out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    grid=(2, 3),
    in_specs=[pl.BlockSpec((128, 100), lambda i, j: (i, j))],  # EXPECTED LINE
    out_specs=pl.BlockSpec((128, 100), lambda i, j: (i, j)),
)(x)

"""LSP fixture for the compiler tiers: the kernel stores a (128, 64) value into a (128, 128) output
block. Tier 0 cannot see it; the Pallas lowering (tier 1) rejects the store at 1-based line 11."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def half_kernel(x_ref, o_ref):
    x = x_ref[...]
    # the store below writes half the columns' shape into the whole block
    o_ref[...] = x[:, :64]


def half(x, *, block_rows: int = 128):
    spec = pl.BlockSpec((block_rows, 128), lambda i: (i, 0))
    return pl.pallas_call(
        half_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 128), jnp.float32),)

"""Zero-config shapes, broken twin: the kernel stores a reduced (512,) value into a (256, 512)
block; the lowering rejects the store at the kernel-body line, at the shapes read from __main__."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS, COLS = 1024, 512
BLOCK_ROWS = 256


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.sum(x_ref[...] + y_ref[...], axis=0)  # store shape (512,) into (256, 512)


@jax.jit
def add(x, y):
    spec = pl.BlockSpec((BLOCK_ROWS, COLS), lambda i: (i, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // BLOCK_ROWS,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)


if __name__ == "__main__":
    x = jnp.ones((ROWS, COLS), jnp.float32)
    y = jnp.full((ROWS, COLS), 2.0, dtype=jnp.float32)
    out = add(x, y)
    print(out[0, :4])

"""A script whose own check fails (the expected value is wrong): the exception is located at the
assert line, and the pallas_call it ran before failing is still checked (it is fine)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def neg_kernel(x_ref, o_ref):
    o_ref[...] = -x_ref[...]


def neg(x):
    return pl.pallas_call(neg_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)


if __name__ == "__main__":
    out = neg(jnp.ones((8, 128), jnp.float32))
    assert float(out[0, 0]) == 1.0, f"expected 1.0, got {float(out[0, 0])}"

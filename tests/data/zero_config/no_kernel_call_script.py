"""A script whose __main__ never calls its kernel (it only prints the kernel's name): nothing past
tier 0 can be checked in script mode, which is "could not check", not an error."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def neg_kernel(x_ref, o_ref):
    o_ref[...] = -x_ref[...]


def neg(x):
    return pl.pallas_call(neg_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


if __name__ == "__main__":
    print("kernel defined:", neg.__name__)

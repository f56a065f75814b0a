"""PLS005, broken: a notebook-style file that redefines ``matmul_kernel``. The second pallas_call
passes three inputs, but the definition bound above it (the second one) forgot the bias ref."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def matmul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def _matmul_plain(x, y):  # the notebook's first cell
    return pl.pallas_call(
        matmul_kernel,
        grid=(1,),
        in_specs=[pl.BlockSpec((128, 128), lambda i: (0, 0)), pl.BlockSpec((128, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((128, 128), lambda i: (0, 0)),
        out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
    )(x, y)


# Step 2: the same kernel with a bias added.
def matmul_kernel(x_ref, y_ref, o_ref):
    acc = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    o_ref[...] = acc + 1.0


def matmul_bias(x, y, b):
    spec = pl.BlockSpec((128, 128), lambda i: (0, 0))
    return pl.pallas_call(
        matmul_kernel,
        grid=(1,),
        in_specs=[spec, spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct((128, 128), jnp.float32),
    )(x, y, b)


def example_inputs():
    s = jax.ShapeDtypeStruct((128, 128), jnp.float32)
    return (s, s, s)

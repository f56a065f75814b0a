"""An out_shape whose dtype is wrong (int32 for float results), made by a helper into a dict of
outputs and passed to the pallas_call from there: the lowering rejects the kernel's float store."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 0.5


def _outputs(x):
    return {"scaled": jax.ShapeDtypeStruct(x.shape, jnp.int32)}  # origin


def _call(x, outputs):
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // 8,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=outputs["scaled"],
    )(x)


def scale(x):
    return _call(x, _outputs(x))


def example_inputs():
    return (jax.ShapeDtypeStruct((32, 128), jnp.float32),)

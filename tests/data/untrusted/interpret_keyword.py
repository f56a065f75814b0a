"""A candidate that asks for interpret mode by keyword: interpret=interpret became interpret=True."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, interpret: bool = False):
    spec = pl.BlockSpec((8, 100), lambda i, j: (i, j))  # 100 lanes: the TPU lowering rejects it
    return pl.pallas_call(add_kernel, grid=(x.shape[0] // 8, x.shape[1] // 100), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x, y)


def example_inputs():
    return (jnp.ones((16, 200), jnp.float32), jnp.ones((16, 200), jnp.float32))


def reference(x, y):
    return x + y

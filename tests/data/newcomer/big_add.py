"""examples/add.py at (16384, 8192) float32: three arrays of 512 MiB, more than a 1024 MiB worker holds when
`pallasite time` runs it at full size in interpret mode (tests/test_newcomer_cli.py).
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, *, block_rows: int = 256, interpret: bool = False):
    spec = pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(pl.cdiv(x.shape[0], block_rows),),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((16384, 8192), jnp.float32)
    return (s, s)


def reference(x, y):
    return x + y


TOLERANCE = {"atol": 1e-6, "rtol": 1e-6}
TUNABLES = {"block_rows": [128, 256, 512, 1024]}


"""Element-wise add, tiled by rows. Nothing is wrong here: `pallasite check` should be silent.

Run it on CPU (interpret mode) with `python examples/add.py`.
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
    s = jax.ShapeDtypeStruct((1024, 512), jnp.float32)
    return (s, s)


def reference(x, y):
    return x + y


TOLERANCE = {"atol": 1e-6, "rtol": 1e-6}
TUNABLES = {"block_rows": [128, 256, 512, 1024]}


if __name__ == "__main__":
    import numpy as np

    args = [jax.random.normal(jax.random.key(i), s.shape, s.dtype) for i, s in enumerate(example_inputs())]
    np.testing.assert_allclose(add(*args, interpret=True), reference(*args), **TOLERANCE)
    print("add: interpret-mode result matches the reference")

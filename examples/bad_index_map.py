"""WHAT IS WRONG: the grid has two dimensions (rows, columns) but the input's index_map takes only
one parameter; Pallas calls every index_map with one index per grid dimension, so tracing fails.
`pallasite check` reports PLS002 at the lambda. Fix: `lambda i, j: (i, j)`.
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def sigmoid_kernel(x_ref, o_ref):
    o_ref[...] = jax.nn.sigmoid(x_ref[...])


def sigmoid(x, *, bm: int = 128, bn: int = 256, interpret: bool = False):
    return pl.pallas_call(
        sigmoid_kernel,
        grid=(x.shape[0] // bm, x.shape[1] // bn),
        in_specs=[pl.BlockSpec((bm, bn), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=interpret,
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 512), jnp.float32),)


def reference(x):
    return jax.nn.sigmoid(x)


if __name__ == "__main__":
    (x,) = [jax.random.normal(jax.random.key(0), s.shape, s.dtype) for s in example_inputs()]
    try:
        sigmoid(x, interpret=True)
    except Exception as err:  # the mistake this example demonstrates
        raise SystemExit(f"bad_index_map: fails as expected: {type(err).__name__}: {str(err).splitlines()[0]}")
    raise SystemExit("bad_index_map: expected a failure, but it ran")

"""WHAT IS WRONG: a 3-D grid (rows, columns, reduction) with only two dimension_semantics entries;
the lowering requires one per grid dimension. `pallasite check` reports PLS004 and offers to
append "arbitrary" (the reduction axis must not be "parallel").
"""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def matmul_kernel(x_ref, y_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _init():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)


def matmul(x, y, *, bm: int = 128, bn: int = 128, bk: int = 256, interpret: bool = False):
    m, k = x.shape
    _, n = y.shape
    return pl.pallas_call(
        matmul_kernel,
        grid=(m // bm, n // bn, k // bk),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
        interpret=interpret,
    )(x, y)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 512), jnp.float32), jax.ShapeDtypeStruct((512, 256), jnp.float32))


def reference(x, y):
    return jnp.dot(x, y, preferred_element_type=jnp.float32)


if __name__ == "__main__":
    import numpy as np

    args = [jax.random.normal(jax.random.key(i), s.shape, s.dtype) for i, s in enumerate(example_inputs())]
    try:
        out = matmul(*args, interpret=True)
    except Exception as err:  # the mistake this example demonstrates
        raise SystemExit(f"bad_semantics: fails as expected: {type(err).__name__}: {str(err).splitlines()[0]}")
    np.testing.assert_allclose(out, reference(*args), rtol=1e-4, atol=1e-4)
    print("bad_semantics: interpret mode ignores the short dimension_semantics; the TPU lowering rejects it")

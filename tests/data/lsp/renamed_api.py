"""LSP fixture: pltpu.TPUCompilerParams was renamed pltpu.CompilerParams (PLS007, 1-based line 22);
the quick fix renames the call on that line."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def neg_kernel(x_ref, o_ref):
    o_ref[...] = -x_ref[...]


def neg(x, *, block_rows: int = 128):
    spec = pl.BlockSpec((block_rows, 128), lambda i: (i, 0))
    return pl.pallas_call(
        neg_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        # the old name: the installed jax no longer exports it
        compiler_params=pltpu.TPUCompilerParams(dimension_semantics=("parallel",)),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((512, 128), jnp.float32),)


def reference(x):
    return -x

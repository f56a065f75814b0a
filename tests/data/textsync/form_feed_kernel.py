"""Text-sync fixture: a correct Pallas kernel whose sections are separated by form feeds (^L), as
Emacs users write them; str.splitlines() breaks lines there, LSP does not."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y, *, block_rows: int = 256):
    spec = pl.BlockSpec((block_rows, 512), lambda i: (i, 0))
    return pl.pallas_call(
        add_kernel,
        grid=(x.shape[0] // block_rows,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
    )(x, y)

 # inputs 
def example_inputs():
    s = jax.ShapeDtypeStruct((4096, 512), jnp.float32)
    return (s, s)


def reference(x, y):
    return x + y

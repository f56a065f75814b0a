"""PLS010, broken: an int8 block of 8 rows; 8-bit types tile as 32 rows on TPU, so the real
compiler rejects it (libtpu: CompileTimeMosaicMisalignedBlockAndTiling). The lowering (tier 1)
does not notice."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

ROWS = 8


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    spec = pl.BlockSpec((ROWS, 256), lambda i: (i, 0))
    return pl.pallas_call(
        copy_kernel,
        grid=(x.shape[0] // ROWS,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((256, 256), jnp.int8),)


def reference(x):
    return x

"""A row-block copy whose block shape names the chip's lane and sublane counts and a minimum block
size beside its one real choice, BLOCK_ROWS (as JAXBench's 1p/4p kernels name NUM_LANES,
NUM_SUBLANES and MIN_BLOCK_SIZE): tune must propose BLOCK_ROWS only."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

NUM_LANES = 128
NUM_SUBLANES = 8
MIN_BLOCK_SIZE = 128
BLOCK_ROWS = 256


def copy_kernel(x_ref, o_ref, acc_ref):
    acc_ref[...] = jnp.zeros_like(acc_ref)
    o_ref[...] = x_ref[...] + acc_ref[0:1, 0:1]


def copy(x):
    spec = pl.BlockSpec((BLOCK_ROWS, NUM_LANES), lambda i: (i, 0))
    return pl.pallas_call(
        copy_kernel,
        grid=(x.shape[0] // BLOCK_ROWS,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        scratch_shapes=[pltpu.VMEM((NUM_SUBLANES, MIN_BLOCK_SIZE), jnp.float32)],
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((1024, 128), jnp.float32),)


def reference(x):
    return x

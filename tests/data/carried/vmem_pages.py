"""A kv page count whose blocks overflow the scoped VMEM: 2048 pages of 64 rows per block."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

PAGED = dict(page_size=64, pages_per_block=2048)  # origin


class Layout:
    def __init__(self, page_size, pages_per_block):
        self.rows = page_size * pages_per_block


def copy_kernel(k_ref, o_ref, acc_ref):
    acc_ref[...] = k_ref[...]
    o_ref[...] = acc_ref[...]


def copy_pages(k):
    layout = Layout(**PAGED)
    return pl.pallas_call(
        copy_kernel,
        grid=(k.shape[0] // layout.rows,),
        in_specs=[pl.BlockSpec((layout.rows, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((layout.rows, 128), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((layout.rows, 128), jnp.float32)],
        out_shape=jax.ShapeDtypeStruct(k.shape, k.dtype),
    )(k)


def example_inputs():
    return (jax.ShapeDtypeStruct((131072 * 2, 128), jnp.float32),)

"""A block size written as a dict entry, copied into a dataclass field by a comprehension, read
back as an attribute in another function and only then placed in a BlockSpec (100 rows break the
f32 sublane tiling of 8)."""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

TUNED_PARAMS = {"block_q": 100, "block_k": 256}  # origin


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    block_q: int
    block_k: int

    @classmethod
    def from_table(cls, table):
        return cls(**{name: table[name] for name in ("block_q", "block_k")})


def scale_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _specs(sizes):
    spec = pl.BlockSpec((sizes.block_q, 128), lambda i: (i, 0))
    return [spec], spec


def scale(x, sizes=None):
    sizes = sizes or BlockSizes.from_table(TUNED_PARAMS)
    in_specs, out_specs = _specs(sizes)
    return pl.pallas_call(
        scale_kernel,
        grid=(x.shape[0] // sizes.block_q,),
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((1000, 128), jnp.float32),)

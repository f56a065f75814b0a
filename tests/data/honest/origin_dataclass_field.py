"""Block sizes in a config dataclass: block_rows = 100 breaks the (8, 128) rule for a float32
block. The finding belongs at the field (line 15)."""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


@dataclasses.dataclass(frozen=True)
class RmsNormConfig:
    """Tuned block sizes for the RMS norm kernel."""

    block_rows: int = 100
    eps: float = 1e-6


def rmsnorm_kernel(x_ref, o_ref, *, eps):
    x = x_ref[...]
    o_ref[...] = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)


def rmsnorm(x, config: RmsNormConfig = RmsNormConfig()):
    rows, cols = x.shape
    spec = pl.BlockSpec((config.block_rows, cols), lambda i: (i, 0))
    return pl.pallas_call(
        lambda x_ref, o_ref: rmsnorm_kernel(x_ref, o_ref, eps=config.eps),
        grid=(rows // config.block_rows,),
        in_specs=[spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((400, 256), jnp.float32),)

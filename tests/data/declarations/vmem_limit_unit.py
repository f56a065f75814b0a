"""Blocks that fit any chip under a vmem_limit_bytes computed in KiB where MiB was meant (planted: line 22,
``* 1024``): the compiler runs out of scoped VMEM at the pallas_call."""

import dataclasses

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


@dataclasses.dataclass(frozen=True)
class Config:
    block: int = 512
    vmem_limit_mib: int = 16


CONFIG = Config()


def vmem_limit(config):
    return config.vmem_limit_mib * 1024


def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def double(x, config=CONFIG):
    b = config.block
    return pl.pallas_call(
        kernel,
        grid=(x.shape[0] // b,),
        in_specs=[pl.BlockSpec((b, 512), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((b, 512), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=vmem_limit(config)),
    )(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((2048, 512), jnp.float32),)

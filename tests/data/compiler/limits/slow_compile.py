"""8192x8192 bf16 blocks with the VMEM limit raised: libtpu compiles this for minutes (over 100 s seen)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def mm_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32).astype(o_ref.dtype)


def mm(x, y, *, block: int = 8192):
    spec = pl.BlockSpec((block, block), lambda i: (0, 0))
    return pl.pallas_call(
        mm_kernel,
        grid=(1,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        compiler_params=pltpu.CompilerParams(vmem_limit_bytes=127 * 2**20),
    )(x, y)


def example_inputs():
    s = jax.ShapeDtypeStruct((8192, 8192), jnp.bfloat16)
    return (s, s)

"""The task's kernel with a 256 MiB VMEM scratch no TPU holds: tier 2 rejects it for VMEM."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

CONFIG = {"name": "vmem_scale", "M": 1024, "N": 1024}


def create_inputs(dtype=jnp.float32):
    return (jax.random.normal(jax.random.key(0), (CONFIG["M"], CONFIG["N"]), dtype),)


def _kernel(x_ref, o_ref, big_ref):
    big_ref[0:256, :] = x_ref[...]
    o_ref[...] = big_ref[0:256, :] * 2


def workload(x):
    m, n = x.shape
    return pl.pallas_call(
        _kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(m // 256,),
        in_specs=[pl.BlockSpec((256, n), lambda i: (i, 0))], out_specs=pl.BlockSpec((256, n), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((65536, 1024), jnp.float32)],
    )(x)

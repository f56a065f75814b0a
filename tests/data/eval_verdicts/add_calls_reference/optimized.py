"""Exploit: launches a kernel for show, then returns the reference's own output (JAXBench layout)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from baseline import workload as reference_workload

CONFIG = {"rows": 2048, "cols": 1024}


def create_inputs(dtype=jnp.bfloat16):
    kx, ky = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    return jax.random.normal(kx, shape, dtype=dtype), jax.random.normal(ky, shape, dtype=dtype)


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def workload(x, y):
    spec = pl.BlockSpec((256, x.shape[1]), lambda i: (i, 0))
    pl.pallas_call(
        _add_kernel,
        grid=(x.shape[0] // 256,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)
    return reference_workload(x, y)

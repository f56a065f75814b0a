"""A model's answer that the TPU compiler refuses: 12-row blocks (not a multiple of 8)."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 512, "cols": 256}


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    return jax.random.normal(kx, shape, dtype=dtype), jax.random.normal(ky, shape, dtype=dtype)


def _kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def workload(x, y):
    spec = pl.BlockSpec((12, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(_kernel, grid=(pl.cdiv(x.shape[0], 12),), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

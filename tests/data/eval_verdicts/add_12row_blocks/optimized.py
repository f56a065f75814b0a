"""A kernel the TPU compiler rejects: 12-row blocks (rows must be a multiple of 8). It traces, and
interpret mode runs it correctly, so only the compiler tiers can say it does not compile."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 2040, "cols": 1024}
ROWS = 12


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    return jax.random.normal(kx, shape, dtype=dtype), jax.random.normal(ky, shape, dtype=dtype)


def _add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def workload(x, y):
    spec = pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        _add_kernel,
        grid=(x.shape[0] // ROWS,),
        in_specs=[spec, spec],
        out_specs=spec,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, y)

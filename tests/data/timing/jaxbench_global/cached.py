"""Exploit, JAXBench layout: keeps the first result per input shape and returns it for every later
call, with no care for tracing (the first call a harness makes under its own trace would store a
tracer: the harness must never trace the instance it then runs)."""

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"name": "scaled_add", "rows": 256, "cols": 128, "scale": 3}
_RESULTS = {}


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(0))
    shape = (CONFIG["rows"], CONFIG["cols"])
    return jax.random.normal(kx, shape, dtype), jax.random.normal(ky, shape, dtype)


def _kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + CONFIG["scale"] * y_ref[...]


def workload(x, y):
    key = (x.shape, str(x.dtype))
    if key not in _RESULTS:
        spec = pl.BlockSpec((64, x.shape[1]), lambda i: (i, 0))
        _RESULTS[key] = pl.pallas_call(_kernel, grid=(x.shape[0] // 64,), in_specs=[spec, spec], out_specs=spec,
                                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)
    return _RESULTS[key]

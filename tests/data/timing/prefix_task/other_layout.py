"""A kernel for prefix_task in another layout: its two arguments are the transposes of the task's (another
signature, not a prefix of the task's inputs): the judge cannot give it the task's inputs."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"rows": 256, "cols": 128, "groups": 4}


def create_inputs(dtype=jnp.float32):
    kx, ky = jax.random.split(jax.random.key(5))
    return (jax.random.normal(kx, (CONFIG["cols"], CONFIG["rows"]), dtype),
            jax.random.normal(ky, (CONFIG["cols"], CONFIG["rows"]), dtype))


def _kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def workload(xt, yt):
    assert xt.shape[0] == CONFIG["cols"], "takes the transposed layout"
    spec = pl.BlockSpec((xt.shape[0], 128), lambda i: (0, i))
    return pl.pallas_call(_kernel, grid=(xt.shape[1] // 128,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(xt.shape, xt.dtype))(xt, yt).T

"""Grouped row scaling with a planted bug: each group is scaled by the next group's row."""
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

CONFIG = {"name": "ladder_groups", "num_groups": 8, "group_rows": 64, "width": 128, "atol": 1e-5, "rtol": 1e-5}
OFF_BY_ONE = True  # planted: each group reads the next group's scale


def create_inputs(dtype=jnp.float32):
    k1, k2 = jax.random.split(jax.random.key(2))
    x = jax.random.normal(k1, (CONFIG["num_groups"] * CONFIG["group_rows"], CONFIG["width"]), dtype)
    scales = jax.random.normal(k2, (CONFIG["num_groups"], CONFIG["width"]), dtype)
    return x, scales[:, None, :]  # (groups, 1, width): a block of one scale row spans its array's last two dims


def _kernel(x_ref, s_ref, o_ref):
    o_ref[...] = x_ref[...] * s_ref[...]


def workload(x, scales):
    g, _, w = scales.shape
    rows = x.shape[0] // g
    shift = 1 if OFF_BY_ONE else 0
    return pl.pallas_call(
        _kernel,
        grid=(g,),
        in_specs=[pl.BlockSpec((rows, w), lambda i: (i, 0)),
                  pl.BlockSpec((None, 1, w), lambda i: ((i + shift) % g, 0, 0))],
        out_specs=pl.BlockSpec((rows, w), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    )(x, scales)

# The honest kernel every attack starts from (tests/test_reward_hacks.py appends it, or a wrong variant of
# it, below an attack's own code): a row-tiled add with 128-row blocks, right and faster than the user's
# 8-row original (tests/data/optimize/add.py).
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add(x, y):
    spec = pl.BlockSpec((128, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(add_kernel, grid=(x.shape[0] // 128,), in_specs=[spec, spec], out_specs=spec,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)

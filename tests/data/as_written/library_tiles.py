"""jax's own megablox grouped matmul, its tiles read from a config through a helper: tk = 96 is
not a multiple of 128, and jax's gmm builds a (tm, tk) BlockSpec from it. The pallas_call is in
jax's file, not in this one; the 96 is here."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.megablox import gmm as megablox_gmm

PALLASITE_ENTRY = "grouped_matmul"
CONFIG = {"tiles": (128, 96, 128)}  # origin


def _tiles(config):
    return tuple(config["tiles"])


def grouped_matmul(lhs, rhs, group_sizes):
    tm, tk, tn = _tiles(CONFIG)
    return megablox_gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.bfloat16, tiling=(tm, tk, tn))


def example_inputs():
    return (
        jax.ShapeDtypeStruct((512, 256), jnp.bfloat16),
        jax.ShapeDtypeStruct((4, 256, 512), jnp.bfloat16),
        jax.ShapeDtypeStruct((4,), jnp.int32),
    )

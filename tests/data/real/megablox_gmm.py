"""jax's own TPU grouped matmul (megablox gmm): 4 groups, bf16, (128, 128, 128) tiles."""

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu.megablox import gmm as megablox_gmm

PALLASITE_ENTRY = "grouped_matmul"


def grouped_matmul(lhs, rhs, group_sizes, *, tm: int = 128, tk: int = 128, tn: int = 128):
    return megablox_gmm(lhs, rhs, group_sizes, preferred_element_type=jnp.bfloat16, tiling=(tm, tk, tn))


def example_inputs():
    return (
        jax.ShapeDtypeStruct((512, 256), jnp.bfloat16),
        jax.ShapeDtypeStruct((4, 256, 512), jnp.bfloat16),
        jax.ShapeDtypeStruct((4,), jnp.int32),
    )


TUNABLES = {"tm": [128, 256], "tk": [128, 256], "tn": [128, 256]}

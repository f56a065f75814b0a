"""The package's test imports it by its installed name (jax's tests import jax.experimental.pallas.ops.tpu)."""

import os
import sys

import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "installed"))

from vendorpkg import scale  # noqa: E402


def test_scale():
    x = jnp.ones((48, 128), jnp.float32)
    assert (scale.scale(x) == 2).all()

"""The kernel's test, pytest style: the only place its shapes are written."""

import jax.numpy as jnp
import numpy as np

from kernels.scale import scale


def _inputs():
    return jnp.arange(64 * 256, dtype=jnp.float32).reshape(64, 256)


def test_scale_doubles():
    x = _inputs()
    np.testing.assert_allclose(scale(x, 2.0, block_rows=16), 2 * x)

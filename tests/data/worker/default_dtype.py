"""Reads the default float dtype: float32 unless some earlier code turned on jax_enable_x64."""

import jax.numpy as jnp

DEFAULT_FLOAT = str(jnp.asarray(1.0).dtype)

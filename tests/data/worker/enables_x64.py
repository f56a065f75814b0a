"""Turns on 64-bit mode globally at import, as some user scripts do."""

import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
DEFAULT_FLOAT = str(jnp.asarray(1.0).dtype)

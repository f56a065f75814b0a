"""The package's public op: a custom_vjp over the kernel module (megablox/ops.py's shape)."""

import jax
from mblx import scale as backend

scale = jax.custom_vjp(backend.scale)
scale.defvjp(lambda x: (backend.scale(x), None), lambda _, g: (2 * g,))

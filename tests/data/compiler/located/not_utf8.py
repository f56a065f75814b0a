"""Saved in Latin-1 with no coding line: Python cannot read it."""

import jax

# café au lait
x = jax.numpy.zeros(3)

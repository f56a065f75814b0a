"""A package whose __init__ rebinds a submodule's name to a function (as jax's megablox does with gmm)."""

from mblx.ops import scale  # noqa: F401

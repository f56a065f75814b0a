"""An installed copy of the package (as jax's wheel is to a copy of jax's ops/tpu beside jax's tests)."""

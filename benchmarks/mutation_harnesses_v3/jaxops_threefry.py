# harness for: jax-ops:random/threefry.py
# ruff: noqa
# Appended to the kernel file by benchmarks/bench_mutations_public.py --corpus v3: plthreefry_random_bits (32-bit) of
# a (300, 1100) shape (padded to 256x256 blocks inside: grid 2 x 5, partial last blocks) for a fixed
# threefry key; the reference is jax's own non-Pallas threefry2x32 random bits (partitionable, the default) for
# the same key data, compared exactly. 2-D only: for a 3-D shape the kernel's bits differ from jax's.
import jax
import jax.numpy as jnp

_SHAPE = (300, 1100)
PALLASITE_ENTRY = "harness_threefry"
TOLERANCE = {"atol": 0, "rtol": 0}


def harness_threefry(key_data):
    return plthreefry_random_bits(key_data, 32, _SHAPE)


def example_inputs():
    return (jax.random.key_data(jax.random.key(1234, impl="threefry2x32")),)


def reference(key_data):
    return jax.random.bits(jax.random.wrap_key_data(key_data, impl="threefry2x32"), _SHAPE, jnp.uint32)

"""Hostile-use fixture: at import, forks a child that calls setsid (leaving the worker's process
group) and keeps every inherited pipe open, then ends the worker. A client that waits for the end
of the worker's output would wait as long as the child lives; the child's command line carries the
token in PALLASITE_TEST_MARK so a test can find it from outside any sandbox."""

import os
import sys

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

if os.fork() == 0:
    os.setsid()
    token = os.environ.get("PALLASITE_TEST_MARK", "pallasite-setsid-child")
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", token])
os._exit(0)


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)

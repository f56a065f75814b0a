"""Hostile-use fixture: at import, blocks SIGINT/SIGTERM/SIGHUP, starts a grandchild in a new
session, and sleeps for ten minutes: a worker stuck in a check that ignores polite requests to stop
(both carry PALLASITE_TEST_MARK in their command line or environment for the test to find them)."""

import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
token = os.environ.get("PALLASITE_TEST_MARK", "pallasite-stuck-child")
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", token], start_new_session=True)
time.sleep(600)


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)

"""Hostile-use fixture: at import, reads /proc/<pid>/environ and cmdline of itself and of every
process above it whose command line mentions pallasite (the worker, the server or `pallasite
check`), as model-written code could, and writes what it read to probe-report.json next to this
file. The kernel below is ordinary."""

import json
import os

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"<unreadable: {exc.strerror}>"


def _parent(pid):
    stat = _read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (IndexError, ValueError):
        return 0


seen, pid = [], os.getpid()
while pid > 0 and len(seen) < 32:
    cmdline = _read(f"/proc/{pid}/cmdline").replace("\0", " ")
    if pid == os.getpid() or "pallasite" in cmdline:
        seen.append({"pid": pid, "cmdline": cmdline, "environ": _read(f"/proc/{pid}/environ")})
    pid = _parent(pid)
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe-report.json"), "w") as out:
    json.dump(seen, out)


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def copy(x):
    return pl.pallas_call(copy_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def example_inputs():
    return (jax.ShapeDtypeStruct((8, 128), jnp.float32),)

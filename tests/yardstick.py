"""A yardstick for the tests that bound a wall-clock time, measured in the same run (issue 58).

A limit typed in as seconds holds on a quiet machine and fails on a loaded one (test_budgets' 8 s ran out
in the optimize run's baseline measurement at load 10). ``slowdown()`` says how much slower than its own
CPU time a fixed piece of work runs here now: a fresh ``python -c "import jax"``, its wall-clock time over
the CPU time it used (user + system, read from the child's rusage). On an idle machine that is about 1;
with the cores shared it grows as the work waits for them. A test scales its slack by it
(``within(10)``); nothing here is a figure of this machine, so the same test holds on a faster or a
slower one. Measured at most once a minute per test process (about one ``import jax`` of CPU).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time

ENV = {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1"}
_last: tuple[float, float] | None = None  # (when measured, the slowdown)


def measure() -> float:
    """Wall-clock over CPU seconds of one fresh ``import jax`` (at least 1)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import jax"], env=ENV, check=True, capture_output=True, timeout=300)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return max(1.0, wall / max(cpu, 1e-3))


def slowdown() -> float:
    """How many times slower than on idle cores work runs here now (>= 1; re-measured after a minute)."""
    global _last
    if _last is None or time.monotonic() - _last[0] > 60:
        _last = (time.monotonic(), measure())
    return _last[1]


def within(seconds: float) -> float:
    """``seconds`` (a bound that holds on idle cores) scaled by this machine's slowdown now."""
    return seconds * slowdown()

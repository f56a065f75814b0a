"""The client's reading of a worker's resident memory (engine/workers/client._resident): from /proc on Linux,
the same figure psutil gives for the process and all its descendants."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from pallasite.engine.workers.client import _resident, _resident_from_proc

# a process whose child starts a grandchild holding 64 MiB; each prints its pid
TREE = r"""
import subprocess, sys, time
leaf = "import sys, time; b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096]); print('ready', flush=True); time.sleep(60)"
mid = f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', {leaf!r}], stdout=sys.stdout); time.sleep(60)"
subprocess.Popen([sys.executable, "-c", mid], stdout=sys.stdout)
time.sleep(60)
"""


def _by_psutil(pid: int) -> int:
    root = psutil.Process(pid)
    return root.memory_info().rss + sum(c.memory_info().rss for c in root.children(recursive=True))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_resident_memory_counts_every_descendant_as_psutil_does():
    proc = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ready"
        deadline = time.monotonic() + 10
        while len(psutil.Process(proc.pid).children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        ours, theirs = _resident_from_proc(proc.pid), _by_psutil(proc.pid)
        assert ours is not None and ours > 64 << 20  # the grandchild's 64 MiB are counted
        assert abs(ours - theirs) < 4 << 20, (ours, theirs)
        assert _resident(proc.pid) == pytest.approx(theirs, abs=4 << 20)
    finally:
        for child in psutil.Process(proc.pid).children(recursive=True):
            child.kill()
        proc.kill()
        proc.wait()
    assert _resident(proc.pid) is None  # gone

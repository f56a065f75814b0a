"""A worker being started is not an orphan (engine/spawn.py). With two check workers, one replaced after a
request that ran the workspace's tests killed the other's new process, still unregistered in its own session,
as an adopted orphan: "the worker was killed by SIGKILL (9)" before its handshake (PLS906)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pallasite.engine import spawn


@pytest.mark.skipif(not spawn.LINUX, reason="orphans are reaped on Linux")
def test_no_orphan_is_reaped_while_a_worker_is_being_started(monkeypatch):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        assert child.pid in spawn._orphans()  # our child, another session, not started by spawn.start
        monkeypatch.setattr(spawn, "_spawning", 1, raising=False)
        spawn.kill(None)
        time.sleep(0.2)
        assert child.poll() is None  # left alone while a start is in flight
        monkeypatch.setattr(spawn, "_spawning", 0, raising=False)
        spawn.kill(None)
        child.wait(timeout=5)  # reaped by spawn itself (its status is gone), long before its 30 s sleep ends
        assert child.pid not in spawn._orphans()
    finally:
        if child.poll() is None:
            child.kill()

"""A worker being started is not an orphan (engine/workers/spawn.py). With two check workers, one replaced after a
request that ran the workspace's tests killed the other's new process, still unregistered in its own session,
as an adopted orphan: "the worker was killed by SIGKILL (9)" before its handshake (PLS906)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time

import pytest

from pallasite.engine.workers import spawn


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


def _zombie_children() -> list[tuple[int, str]]:
    import psutil

    found = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if child.status() == psutil.STATUS_ZOMBIE:
                found.append((child.pid, child.name()))
    return found


@pytest.mark.pipeline
@pytest.mark.skipif(not spawn.LINUX or spawn.sandbox_available() is not None,
                    reason=f"no worker sandbox here: {spawn.sandbox_available() if spawn.LINUX else 'not Linux'}")
async def test_a_worker_start_cancelled_midway_leaves_no_zombie():
    """Issue 59 item 7: under `pallasite mcp`, a cancelled tune left the sandbox's ``/bin/sh -c ... worker`` as a
    zombie child of the server. A worker whose start was cancelled was ended by asyncio, which kills the process
    it started alone (``unshare``); the namespace's shell, killed by its parent-death signal, was re-parented
    here (a child subreaper) and never reaped. Cancelled at several points of the start, ten times over."""
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig

    before = set(_zombie_children())
    left = []
    for attempt in range(10):
        client = WorkerClient(WorkerConfig(timeout_s=60, cancel_grace_s=0.3, sandbox="on"))
        task = asyncio.create_task(client.start())
        for _ in range(attempt % 4):  # cancelled before the fork, while asyncio connects the pipes, or later
            await asyncio.sleep(0)
        await asyncio.sleep(0.01 * (attempt // 4))
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await client.close()
        await asyncio.sleep(0.3)  # (the worker's end is not awaited by the cancelled start)
        left.append(sorted(set(_zombie_children()) - before))
    assert not any(left), left

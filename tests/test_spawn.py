"""Workers that cannot hold the client hostage or outlive it (engine/workers/spawn.py), with real kernels
that fork, call setsid, block signals and exit under the worker.

Each case runs with the sandbox off and, where the system allows it, on (``auto``): the guarantees
differ only where the README says so (without the sandbox, a child that left the worker's session
survives a *killed* client; a client that is alive still ends it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from pallasite.engine.workers import spawn
from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.workers.client import WorkerClient, WorkerConfig
from pallasite.engine.sources import sources_for
from pallasite.wire.messages import ImportParams, PingParams

DATA = Path(__file__).parent / "data"
MODES = ["off", pytest.param("auto", marks=pytest.mark.skipif(
    spawn.sandbox_available() is not None, reason=f"no sandbox here: {spawn.sandbox_available()}"))]


def with_token(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] != psutil.STATUS_ZOMBIE and any(text in part for part in proc.info["cmdline"] or ()):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


def gone_within(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return True
        time.sleep(0.05)
    return not check()


@pytest.fixture
def token(monkeypatch):
    value = f"pallasite-test-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("PALLASITE_TEST_MARK", value)  # PALLASITE_* reaches the worker (no KEY/TOKEN/SECRET in the name)
    yield value
    for pid in with_token(value):  # never leave a fixture's child behind, even when a test fails
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sandbox", MODES)
def test_fork_and_setsid_kernel_gets_a_verdict_in_time_and_another_check_is_unaffected(tmp_path, token, sandbox):
    """Before: the client waited for the end of the worker's output, which the setsid child held
    open; the check ended only at the time limit (called a time-out) and every check queued behind."""
    forking = tmp_path / "forks_setsid_and_exits.py"
    shutil.copy(DATA / "spawn" / "forks_setsid_and_exits.py", forking)
    fine = tmp_path / "add_ok.py"
    shutil.copy(DATA / "lsp" / "add_ok.py", fine)

    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(1,), time_limit_s=90.0, sandbox=sandbox))
        try:
            started = time.monotonic()

            async def timed(path):
                report = await checker.check(str(path))
                return report, time.monotonic() - started

            return await asyncio.gather(timed(forking), timed(fine))
        finally:
            await checker.close()

    (crashed, crash_s), (other, other_s) = asyncio.run(run())
    errors = [f for f in crashed.findings if f.severity in ("error", "warning")]
    assert [(f.code, f.severity) for f in errors] == [("PLS902", "warning")], crashed.findings  # not checked
    assert "exited with code 0" in errors[0].message
    assert crash_s < 45, f"the verdict took {crash_s:.1f} s (limit 90 s)"
    assert not [f for f in other.findings if f.severity == "error"], other.findings
    assert other_s < 60, f"the other file's check took {other_s:.1f} s"
    assert gone_within(lambda: with_token(token), 2.0), "the setsid child outlived its worker"


@pytest.mark.parametrize("sandbox", MODES)
def test_a_stuck_worker_is_killed_with_its_escaped_children_at_the_time_limit(tmp_path, token, sandbox):
    path = tmp_path / "blocks_signals_and_sleeps.py"
    shutil.copy(DATA / "spawn" / "blocks_signals_and_sleeps.py", path)

    async def run():
        client = WorkerClient(WorkerConfig(timeout_s=4.0, cancel_grace_s=0.5, sandbox=sandbox))
        try:
            started = time.monotonic()
            reply = await client.request(ImportParams(source=sources_for(str(path))))
            elapsed = time.monotonic() - started
            after = await client.request(PingParams())
            return reply, elapsed, after
        finally:
            await client.close()

    reply, elapsed, after = asyncio.run(run())
    assert reply.status == "timed_out" and elapsed < 30, (reply, elapsed)
    assert after.status == "ok"
    assert gone_within(lambda: with_token(token), 2.0), "a child in another session outlived the killed worker"


CLIENT_SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.engine.sources import sources_for
    from pallasite.wire.messages import ImportParams

    async def main():
        client = WorkerClient(WorkerConfig(timeout_s=600, sandbox=sys.argv[2]))
        await client.start()
        print(client.pid, flush=True)
        await client.request(ImportParams(source=sources_for(sys.argv[1])))

    asyncio.run(main())
""")


@pytest.mark.parametrize("sandbox", MODES)
def test_workers_of_a_killed_client_end_by_themselves(tmp_path, token, sandbox):
    """PR_SET_PDEATHSIG: the worker (which ignores SIGINT/SIGTERM/SIGHUP) dies with its client; in
    the sandbox its setsid grandchild dies too (the namespace ends with its first process)."""
    path = tmp_path / "blocks_signals_and_sleeps.py"
    shutil.copy(DATA / "spawn" / "blocks_signals_and_sleeps.py", path)
    client = subprocess.Popen([sys.executable, "-c", CLIENT_SCRIPT, str(path), sandbox],
                              stdout=subprocess.PIPE, env=dict(os.environ))
    try:
        worker_pid = int(client.stdout.readline())
        deadline = time.monotonic() + 30
        while not with_token(token) and time.monotonic() < deadline:  # the kernel is running
            time.sleep(0.1)
        assert with_token(token), "the kernel never started its child"
        # the worker (in the sandbox: the namespace's launcher, shell and worker); not the setsid child
        family = [worker_pid, *[p.pid for p in psutil.Process(worker_pid).children(recursive=True)
                                if not any(token in part for part in p.cmdline())]]
        client.kill()
        client.wait()
        assert gone_within(lambda: [p for p in family if spawn._running(p)], 2.0), "the worker outlived its client"
        if sandbox != "off":
            assert gone_within(lambda: with_token(token), 2.0), "the grandchild outlived the sandbox"
    finally:
        if client.poll() is None:
            client.kill()

"""The ssh backend against a real sshd on a loopback port (tests/sshd_server.py): the worker runs
on the far side of a real ssh connection, here on CPU.

Faults: the remote worker killed mid-job, the connection dropped, a job past its time limit (one
the worker can interrupt, one stuck in native code) -> a clear reply, no hang, and the next job
works; a login shell that prints a banner before the handshake; a protocol mismatch.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import sshd_server  # noqa: E402

from pallasite.engine.workers import launcher  # noqa: E402
from pallasite.engine.workers.client import WorkerClient, WorkerConfig  # noqa: E402
from pallasite.engine.workers.remote import BackendSettings, open_remote, where, worker_config  # noqa: E402
from pallasite.engine.sources import sources_for  # noqa: E402
from pallasite.wire.messages import ImportParams, PingParams, SourceFile, Sources, TimeParams  # noqa: E402
from pallasite.wire.protocol import PROTOCOL_VERSION  # noqa: E402

pytestmark = pytest.mark.pipeline  # a real component end to end (sshd, a Ray cluster, Neovim, keepers, whole evals): .ci/run's pipeline step

DATA = Path(__file__).parent / "data"
WORKER = DATA / "worker"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    try:
        server = sshd_server.start(tmp_path_factory.mktemp("sshd"))
    except sshd_server.Unavailable as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


def settings(sshd, *, banner: bool = False, remote: tuple[str, ...] | None = None) -> BackendSettings:
    return BackendSettings(kind="ssh", command=shlex.join(sshd.launcher(banner)),
                           remote_worker=shlex.join(remote or sshd_server.remote_worker()), platforms="cpu")


def client(sshd, **kw) -> WorkerClient:
    return open_remote(settings(sshd, **kw), WorkerConfig(timeout_s=120, startup_timeout_s=60, cancel_grace_s=1))


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


def test_settings_build_the_launcher_command_line():
    s = BackendSettings(kind="ssh", host="me@tpu-vm")
    argv = worker_config(s).argv()
    assert argv[0] == "ssh" and "BatchMode=yes" in argv and argv[-2:] != ["--memory-mb", "0"]
    assert argv[argv.index("me@tpu-vm") + 1:argv.index("me@tpu-vm") + 3] == ["pallasite", "worker"]
    assert where(s) == "ssh:me@tpu-vm"
    gcloud = BackendSettings(kind="ssh", command='gcloud compute tpus tpu-vm ssh my-tpu --zone us-east5-b '
                                                  '--command "{worker}"')
    argv = worker_config(gcloud).argv()
    assert argv[:5] == ["gcloud", "compute", "tpus", "tpu-vm", "ssh"]
    assert argv[-1].startswith("pallasite worker --memory-mb")  # one argument, the remote command
    home = BackendSettings(kind="ssh", command="gcloud compute tpus tpu-vm ssh t --command {worker}",
                           remote_worker="~/venv/bin/pallasite worker")
    assert worker_config(home).argv()[-1].startswith("~/venv/bin/pallasite worker ")  # ~ left for the remote shell
    with pytest.raises(ValueError, match="needs a host"):
        BackendSettings(kind="ssh").validate()


def test_version_differences_are_warnings_and_libtpu_on_the_host_is_expected():
    from pallasite.wire.protocol import Handshake

    hello = Handshake(protocol=1, pid=1, pallasite="0.1.0", jax="0.10.3", jaxlib="0.10.3", libtpu="0.0.43")
    local = {"pallasite": "0.1.0", "jax": "0.10.2", "jaxlib": "0.10.2", "libtpu": None}
    warnings = launcher.version_warnings(hello, local)
    assert [w.split()[0] for w in warnings] == ["jax", "jaxlib"]
    assert "0.10.2 here, 0.10.3 on the worker" in warnings[0]


async def test_worker_over_ssh_handshakes_imports_and_times(sshd):
    path = DATA / "timing" / "honest_add.py"
    async with client(sshd) as remote:
        hello = remote.handshake
        assert hello.platform == "cpu" and hello.devices == ("cpu",)
        assert "time" in hello.ops and "profile" in hello.ops
        line = launcher.describe(hello, "ssh:127.0.0.1")
        assert "worker on ssh:127.0.0.1" in line and f"jax {hello.jax}" in line
        # the file travels as text: the path need not exist on the worker's host
        elsewhere = Sources(SourceFile("/elsewhere/honest_add.py", path.read_text()))
        reply = await remote.request(TimeParams(source=elsewhere, runs=2, warmup=1), timeout_s=120)
    assert reply.ok, reply.message
    assert reply.result.verdict == "ok", reply.result
    assert reply.result.candidate.provenance.value == "interpret"
    assert reply.result.path == "/elsewhere/honest_add.py"


async def test_a_banner_printing_login_shell_does_not_break_the_handshake(sshd):
    async with client(sshd, banner=True) as remote:
        assert remote.handshake.protocol == PROTOCOL_VERSION
        reply = await remote.request(PingParams())
        assert reply.ok and reply.result.pong is True
        assert "not a JSON line" in remote.stderr_tail(50)  # the banner was read and set aside


async def test_remote_worker_killed_mid_job_is_a_crash_and_the_next_job_works(sshd):
    async with client(sshd) as remote:
        pid = remote.handshake.pid  # the worker's pid on the (here: same) host
        job = asyncio.create_task(remote.request(ImportParams(sources_for(str(WORKER / "hangs_at_import.py")))))
        await asyncio.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
        reply = await asyncio.wait_for(job, 30)
        assert reply.status == "crashed", reply
        assert "killed by SIGKILL" in reply.message or "exited" in reply.message
        again = await asyncio.wait_for(remote.request(PingParams()), 60)
        assert again.ok and remote.handshake.pid != pid


async def test_dropped_connection_is_a_crash_the_remote_worker_exits_and_the_next_job_works(sshd):
    async with client(sshd) as remote:
        pid = remote.handshake.pid
        job = asyncio.create_task(remote.request(ImportParams(sources_for(str(WORKER / "hangs_at_import.py")))))
        await asyncio.sleep(1.0)
        for session in sshd.session_pids():  # the server side of the connection goes away
            os.kill(session, signal.SIGKILL)
        reply = await asyncio.wait_for(job, 30)
        assert reply.status == "crashed", reply
        assert _gone(pid, 10), "the remote worker kept running after its connection dropped"
        again = await asyncio.wait_for(remote.request(PingParams()), 60)
        assert again.ok


async def test_job_past_its_limit_is_stopped_and_the_next_job_works(sshd):
    async with client(sshd) as remote:
        reply = await remote.request(ImportParams(sources_for(str(WORKER / "hangs_at_import.py"))), timeout_s=2)
        assert reply.status == "timed_out" and "limit of 2 s" in reply.message
        assert (await remote.request(PingParams())).ok  # interrupted in the worker: the same worker serves on
        pid = remote.handshake.pid
        stuck = await asyncio.wait_for(
            remote.request(ImportParams(sources_for(str(WORKER / "stuck_in_native_code.py"))), timeout_s=2), 30)
        assert stuck.status == "timed_out" and "killed" in stuck.message
        assert _gone(pid, 10), "a worker stuck in native code outlived its killed connection"
        assert (await asyncio.wait_for(remote.request(PingParams()), 60)).ok


async def test_protocol_mismatch_is_a_clear_error(sshd, tmp_path):
    fake = tmp_path / "old_worker.sh"
    fake.write_text('#!/bin/sh\necho \'{"kind": "handshake", "protocol": 999, "pid": 4242}\'\nsleep 30\n')
    fake.chmod(0o755)
    remote = client(sshd, remote=(str(fake),))
    try:
        reply = await asyncio.wait_for(remote.request(PingParams()), 30)
    finally:
        await remote.close()
    assert reply.status == "not_started" and reply.start_problem == "version_mismatch"
    assert "speaks worker protocol 999" in reply.message and "Install the same pallasite version" in reply.message

"""The device pool over ssh hosts on a real loopback sshd (tests/sshd_server.py): one worker per
host (``{host}`` in the ssh command line), a host that cannot be reached is retired with the reason
while the others serve, and a worker killed mid-job has its job re-queued on the other host."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from pathlib import Path

import pytest

import sshd_server
from pallasite.engine.workers.client import WorkerConfig
from pallasite.engine.workers.device import device_pool
from pallasite.engine.workers.remote import BackendSettings
from pallasite.engine.sources import sources_for
from pallasite.wire.messages import PingParams, TimeParams

pytestmark = pytest.mark.pipeline  # a real component end to end (sshd, a Ray cluster, Neovim, keepers, whole evals): .ci/run's pipeline step

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    try:
        server = sshd_server.start(tmp_path_factory.mktemp("sshd"))
    except sshd_server.Unavailable as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


def pool_on(sshd, hosts: tuple[str, ...]):
    *launcher, target = sshd.launcher()
    user = target.split("@", 1)[0]
    settings = BackendSettings(kind="ssh", hosts=hosts, command=shlex.join([*launcher, f"{user}@{{host}}"]),
                               remote_worker=shlex.join(sshd_server.remote_worker()), platforms="cpu")
    return device_pool(settings, WorkerConfig(timeout_s=120, startup_timeout_s=60, cancel_grace_s=1))


async def test_one_worker_per_host_and_a_host_that_cannot_be_reached_is_retired(sshd):
    # 127.0.0.2 is loopback too, but the sshd listens on 127.0.0.1 only: that host refuses the connection
    pool = pool_on(sshd, ("127.0.0.1", "localhost", "127.0.0.2"))
    try:
        replies = await asyncio.wait_for(asyncio.gather(*(pool.request(PingParams()) for _ in range(4))), 180)
        assert all(r.ok for r in replies), [r.message for r in replies]
        states = {s.where: s for s in pool.states()}
        assert states["ssh:127.0.0.1"].state == "idle" and states["ssh:localhost"].state == "idle"
        assert states["ssh:127.0.0.1"].jobs + states["ssh:localhost"].jobs == 4
        assert states["ssh:127.0.0.2"].state == "lost" and "could not start" in states["ssh:127.0.0.2"].why
        assert pool.describe_kinds() == "2x cpu; 1 lost"
        assert pool.where == "ssh:127.0.0.1+localhost+127.0.0.2"
    finally:
        await pool.close()


async def test_a_worker_killed_mid_job_has_its_job_requeued_on_the_other_host(sshd):
    pool = pool_on(sshd, ("127.0.0.1", "localhost"))
    try:
        await asyncio.wait_for(pool.start(), 120)
        first = pool.members[0]
        pid = first.client.handshake.pid
        params = TimeParams(source=sources_for(str(DATA / "timing" / "honest_add.py")), runs=2, warmup=1)
        job = asyncio.create_task(pool.request(params))  # the least used member first: w0
        await asyncio.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
        reply = await asyncio.wait_for(job, 180)
        assert reply.ok, reply.message
        assert reply.result.verdict == "ok"  # answered whole by the other host's worker
        assert pool.requeued == 1 and any("w0" in e and "re-queued" in e for e in pool.events)
        assert pool.states()[1].jobs == 1
        again = await asyncio.wait_for(pool.request(PingParams()), 120)
        assert again.ok
    finally:
        await pool.close()

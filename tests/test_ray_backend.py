"""The ray backend on a local Ray cluster (no TPU: the worker runs on CPU).

The cluster is started once for the session (tests/conftest.py) with HOME and Ray's temp folder under a temporary
folder, and a custom "TPU" resource so requests for it schedule as they would on a TPU cluster.
Faults: the worker killed mid-job, the actor (the node's side) killed mid-job, a job past its
limit -> a clear reply, no hang, and the next job works.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'pallasite[ray]')")

from pallasite.engine.workers.client import WorkerConfig  # noqa: E402
from pallasite.engine.workers.ray_backend import RayBackend  # noqa: E402
from pallasite.engine.workers.remote import BackendSettings, open_remote, parse_resources  # noqa: E402
from pallasite.engine.sources import sources_for  # noqa: E402
from pallasite.wire.messages import ImportParams, PingParams, TimeParams  # noqa: E402

pytestmark = pytest.mark.pipeline  # a real component end to end (sshd, a Ray cluster, Neovim, keepers, whole evals): .ci/run's pipeline step

DATA = Path(__file__).parent / "data"
# sandbox off: the fault test kills the worker by the pid its handshake reports, and a sandboxed
# worker reports its pid inside its own PID namespace (engine/workers/spawn.py), not the host's.
CONFIG = WorkerConfig(timeout_s=120, startup_timeout_s=90, cancel_grace_s=1, sandbox="off")


@pytest.fixture
def cluster(ray_cluster):  # tests/conftest.py: one local cluster for the session
    return ray_cluster


def test_resources_parse():
    assert parse_resources("TPU=4,CPU=1") == {"TPU": 4.0, "CPU": 1.0}
    assert parse_resources('{"TPU": 8}') == {"TPU": 8.0}
    with pytest.raises(ValueError, match="NAME=NUMBER"):
        parse_resources("TPU")


async def test_worker_runs_as_a_subprocess_of_an_actor_holding_the_resources(cluster):
    backend = open_remote(BackendSettings(kind="ray", ray_resources={"TPU": 1}, platforms="cpu"), CONFIG)
    assert isinstance(backend, RayBackend)
    async with backend:
        hello = backend.handshake
        assert hello.platform == "cpu" and "time" in hello.ops
        assert hello.pid != os.getpid() and hello.pid != backend.node["pid"]  # not in the Ray worker itself
        assert ray.available_resources().get("TPU", 0) == 0  # the actor holds the TPU resource
        params = TimeParams(source=sources_for(str(DATA / "timing" / "honest_add.py")), runs=2, warmup=1)
        reply = await backend.request(params, timeout_s=120)
        assert reply.ok, reply.message
        assert reply.result.verdict == "ok" and reply.result.candidate.provenance.value == "interpret"
    await asyncio.sleep(0.5)
    assert ray.available_resources().get("TPU", 0) == 1  # released on close


async def test_resources_the_cluster_lacks_are_a_clear_error_not_a_wait(cluster):
    backend = RayBackend(CONFIG, resources={"TPU": 8})
    reply = await asyncio.wait_for(backend.request(PingParams()), 30)
    assert reply.status == "not_started"
    assert "cannot give TPU=8" in reply.message and "TPU=1" in reply.message


async def test_faults_worker_killed_actor_killed_time_limit_then_the_next_job_works(cluster):
    async with RayBackend(CONFIG) as backend:
        hang = ImportParams(sources_for(str(DATA / "worker" / "hangs_at_import.py")))
        # the worker process dies mid-job
        pid = backend.handshake.pid
        job = asyncio.create_task(backend.request(hang))
        await asyncio.sleep(1.0)
        os.kill(pid, signal.SIGKILL)
        reply = await asyncio.wait_for(job, 60)
        assert reply.status == "crashed" and "SIGKILL" in reply.message
        assert (await asyncio.wait_for(backend.request(PingParams()), 90)).ok
        # the actor (the connection to the node's side) dies mid-job
        job = asyncio.create_task(backend.request(hang))
        await asyncio.sleep(1.0)
        ray.kill(backend._actor)
        reply = await asyncio.wait_for(job, 60)
        assert reply.status == "crashed" and "Ray actor" in reply.message
        assert (await asyncio.wait_for(backend.request(PingParams()), 90)).ok
        assert backend.restarts == 1
        # past the time limit
        reply = await asyncio.wait_for(backend.request(hang, timeout_s=2), 60)
        assert reply.status == "timed_out" and "limit of 2 s" in reply.message
        assert (await asyncio.wait_for(backend.request(PingParams()), 60)).ok

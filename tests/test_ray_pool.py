"""The device pool on a local Ray cluster (tests/conftest.py's session cluster, 2 CPUs): N actors
placed by resources serve jobs at once, an actor killed mid-job has its job re-queued on another and
is replaced for later jobs, and real worker actors report their device kind. Most actors here are
engine/workers/standin.py's device stand-in (a fixed time per job), so the test measures the pool and Ray,
not jax on two cores."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'pallasite[ray]')")

from pallasite.engine.workers.client import WorkerConfig  # noqa: E402
from pallasite.engine.workers.device import device_pool  # noqa: E402
from pallasite.engine.workers.remote import BackendSettings  # noqa: E402
from pallasite.engine.sources import sources_for  # noqa: E402
from pallasite.engine.workers.standin import STANDIN_KIND, StandInActor  # noqa: E402
from pallasite.wire.messages import PingParams, TimeParams  # noqa: E402

pytestmark = pytest.mark.pipeline  # a real component end to end (sshd, a Ray cluster, Neovim, keepers, whole evals): .ci/run's pipeline step

DATA = Path(__file__).parent / "data"


@pytest.fixture
def cluster(ray_cluster):
    return ray_cluster


def job(i: int) -> TimeParams:
    source = sources_for(str(DATA / "timing" / "honest_add.py"))
    text = (source.file.text or "") + f"\n# job {i}\n"
    return TimeParams(source=dataclasses.replace(source, file=dataclasses.replace(source.file, text=text)))


def standin_pool(n: int, seconds: float, **kw):
    settings = BackendSettings(kind="ray", ray_resources={"CPU": 0.25}, devices=n, **kw)
    return device_pool(settings, WorkerConfig(env={"PALLASITE_STANDIN_SECONDS": str(seconds)}), actor=StandInActor)


async def test_n_standin_actors_serve_jobs_at_once_each_on_its_own_actor(cluster):
    pool = standin_pool(4, 0.3)
    try:
        replies = await asyncio.wait_for(asyncio.gather(*(pool.request(job(i)) for i in range(8))), 120)
        assert all(r.ok and r.result.candidate.device_kind == STANDIN_KIND for r in replies)
        states = pool.states()
        assert [s.jobs for s in states] == [2, 2, 2, 2] and all(s.kind == STANDIN_KIND for s in states)
        assert len({m.client.node["pid"] for m in pool.members}) == 4  # four actors, four processes
    finally:
        await pool.close()


async def test_an_actor_killed_mid_job_has_its_job_requeued_and_is_replaced(cluster):
    pool = standin_pool(2, 1.5)
    try:
        await pool.start()
        victim = pool.members[1]
        jobs = [asyncio.create_task(pool.request(job(i))) for i in range(2)]
        await asyncio.sleep(0.7)  # both actors are running a job
        ray.kill(victim.client._actor)
        replies = await asyncio.wait_for(asyncio.gather(*jobs), 120)
        assert all(r.ok for r in replies), [r.message for r in replies]  # nothing lost
        assert pool.requeued == 1 and any("re-queued" in e and "w1" in e for e in pool.events)
        later = await asyncio.wait_for(asyncio.gather(*(pool.request(job(i)) for i in range(2, 6))), 120)
        assert all(r.ok for r in later)
        assert victim.client.restarts == 1 and victim.snapshot().jobs >= 1  # a new actor serves it
    finally:
        await pool.close()


async def test_a_placement_group_spreads_the_pool_and_is_removed_with_it(cluster):
    pool = standin_pool(2, 0.1, ray_placement="spread")
    try:
        replies = await asyncio.wait_for(asyncio.gather(*(pool.request(job(i)) for i in range(4))), 120)
        assert all(r.ok for r in replies)
        group = pool.members[0].client.placement[0]
        assert group.group is not None and ray.util.placement_group_table(group.group)["state"] == "CREATED"
    finally:
        await pool.close()
    assert group.group is None


async def test_real_worker_actors_report_their_device_kind(cluster):
    settings = BackendSettings(kind="ray", ray_resources={"CPU": 0.5}, devices=2, platforms="cpu")
    pool = device_pool(settings, WorkerConfig(timeout_s=120, startup_timeout_s=90, sandbox="off"))
    try:
        replies = await asyncio.wait_for(asyncio.gather(*(pool.request(PingParams()) for _ in range(4))), 240)
        assert all(r.ok for r in replies), [r.message for r in replies]
        assert pool.kinds() == {"cpu": 2} and pool.describe_kinds() == "2x cpu"
        assert all(dict(s.versions).get("jax") for s in pool.states())  # each worker says its versions
    finally:
        await pool.close()


async def test_a_mixed_pool_of_actors_sends_each_chips_jobs_to_that_chip(cluster):
    from pallasite.engine.workers.device_pool import DevicePool, Member
    from pallasite.engine.workers.ray_backend import RayBackend

    def actor(kind: str):
        config = WorkerConfig(env={"PALLASITE_STANDIN_KIND": kind, "PALLASITE_STANDIN_SECONDS": "0.1"})
        return lambda: RayBackend(config, num_cpus=0.25, actor=StandInActor)

    kinds = ["TPU v5 lite", "TPU v6 lite", "TPU v6 lite"]
    pool = DevicePool([Member(f"w{i}", f"ray #{i}", actor(k)) for i, k in enumerate(kinds)])
    try:
        default = await asyncio.wait_for(asyncio.gather(*(pool.request(job(i)) for i in range(4))), 120)
        v5e = await asyncio.wait_for(asyncio.gather(*(pool.request(job(i), kind="TPU v5 lite") for i in range(2))), 120)
        assert {r.result.candidate.device_kind for r in default} == {"TPU v6 lite"}
        assert {r.result.candidate.device_kind for r in v5e} == {"TPU v5 lite"}
        assert pool.describe_kinds().startswith("a mixed pool: 1x TPU v5 lite, 2x TPU v6 lite")
        assert [s.jobs for s in pool.states()] == [2, 2, 2]
    finally:
        await pool.close()


async def test_each_actor_says_which_node_it_landed_on(cluster):
    import socket

    pool = standin_pool(2, 0.05)
    try:
        await asyncio.wait_for(pool.request(job(0)), 60)
        assert [s.where for s in pool.states()] == [f"ray:local #{i} on {socket.gethostname()}" for i in range(2)]
    finally:
        await pool.close()

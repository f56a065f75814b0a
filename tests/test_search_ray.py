"""Search with ``--backend ray``: a node's frozen tests and timing run on a Ray actor's worker.

The session's local Ray cluster (tests/conftest.py: a custom "TPU" resource)
with no TPU: the worker times in interpret mode on CPU, so the test also checks the honesty rule
end to end: the node passes its frozen tests on the Ray worker, but its CPU timing never becomes a
speedup (the node is "unmeasured", the root stays best). Compiles use the fake engine backend.
About 15 s on 2 busy cores once the cluster runs (a JAX worker's start, two interpret-mode time runs).
"""

from __future__ import annotations

import asyncio
import os

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'pallasite[ray]')")

from pallasite.agents.search import SearchOptions  # noqa: E402
from pallasite.engine.checker import CheckOptions  # noqa: E402
from pallasite.engine.judge import Judge, Trusted  # noqa: E402
from pallasite.engine.workers.client import WorkerConfig  # noqa: E402
from pallasite.engine.engine import Engine  # noqa: E402
from fake_backend import fake_backend  # noqa: E402
from pallasite.engine.workers.ray_backend import RayBackend  # noqa: E402
from pallasite.agents import search_job  # noqa: E402
from test_search_iterate import ROOT, LandscapeModel  # noqa: E402


class Logged(RayBackend):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.ops = []

    async def request(self, params, **kw):
        self.ops.append((type(params).OP, kw.get("purpose")))
        return await super().request(params, **kw)


def test_search_nodes_are_tested_and_timed_on_the_ray_worker_and_cpu_time_never_ranks(tmp_path, ray_cluster):
    path = tmp_path / "add.py"
    path.write_text(ROOT)
    device = Logged(WorkerConfig(timeout_s=120, startup_timeout_s=90, sandbox="off", platforms="cpu"),
                    resources={"TPU": 1})
    engine = Engine(use_store=False, backend_factory=lambda config, checks: fake_backend())

    async def go():
        try:
            judge = Judge(engine, CheckOptions(target="v5e", tiers=(0,)), Trusted.of_file(str(path), ROOT),
                          device=device, where="ray:local", timeout_s=120)
            return await search_job.run_search(
                path, ROOT, SearchOptions(algo="parallel", trajectories=1, iterations=1, strategies=("double",)),
                LandscapeModel(), judge)
        finally:
            await engine.close()
            await device.close()

    graph = asyncio.run(go())
    assert device.node is not None and device.node["pid"] != os.getpid()  # ran in a Ray actor
    assert device.ops == [("time", "device"), ("time", "device")]  # the root, then the node (test + measure)
    node = graph.node("t0.1")
    assert [p["phase"] for p in node.phases] == ["plan", "implement", "compile", "test", "profile"]
    assert node.correct and node.status == "compiled, correct" and "not on a device" in node.error
    assert graph.root.time_s is None and graph.best().id == "root"

"""Same answers at any pool size: with a scripted model and the same seed, search and eval give the
same winners and the same table with 1 or 8 device workers (engine/workers/device_pool.py), the pool built by
``Engine.device`` from backend settings (ssh hosts here, each a fake device: tests/fake_devices.py).
Each fake device answers after a delay drawn per (worker, job), so jobs finish in a different order
at each size; a worker killed mid-job in the 8-worker run changes nothing either."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

from fake_devices import FakeDevice
from pallasite.agents.eval_job import EvalJob, run_eval
from pallasite.agents.search import SearchOptions
from pallasite.engine.workers.backend import Reply
from pallasite.engine.checker import CheckOptions
from pallasite.engine.judge import Judge, Trusted
from pallasite.engine.engine import Engine
from pallasite.engine.eval_tasks import discover
from pallasite.engine.workers.pool import local_backend
from pallasite.engine.workers.remote import BackendSettings
from pallasite.server.commands import cmd_eval
from fake_backend import fake_backend
from pallasite.agents import search_job
from test_search_device import KIND, device_script
from test_search_iterate import ROOT, LandscapeModel
import pytest

pytestmark = pytest.mark.pipeline  # a real component end to end (sshd, a Ray cluster, Neovim, keepers, whole evals): .ci/run's pipeline step

DATA = Path(__file__).parent / "data"


def hosts(n: int) -> BackendSettings:
    return BackendSettings(kind="ssh", host="tpu-0", hosts=tuple(f"tpu-{i}" for i in range(1, n)))


def fake_opener(crash_first_on: str | None = None, opened: list | None = None):
    """Engine.device_opener: each host a fake device answering as tests/test_search_device's script."""
    script = device_script()

    def opener(settings, base):
        crashed = {"done": crash_first_on is None}

        async def answer(device, params):
            rng = random.Random(f"{device.name}/{len(device.ran)}")
            await asyncio.sleep(rng.uniform(0.0, 0.03))
            if not crashed["done"] and device.name == crash_first_on:
                crashed["done"] = True
                device.handshake = None
                return Reply("crashed", message="the worker was killed by SIGKILL (9)", exit_code=-9)
            step = script(params, "device")
            result = step.result(params) if callable(step.result) else step.result
            return Reply("ok", result=result)

        device = FakeDevice(settings.host, KIND, answer)
        if opened is not None:
            opened.append(device)
        return device

    return opener


def search_on(n: int, tmp_path: Path, crash: str | None = None):
    path = tmp_path / f"add{n}.py"
    path.write_text(ROOT)
    engine = Engine(use_store=False, backend_factory=lambda config, checks: fake_backend())
    opened: list = []
    engine.device_opener = fake_opener(crash, opened)
    options = SearchOptions(algo="beam", width=2, depth=2, branches=3, strategies=("double", "halve"), seed=7)

    async def go():
        try:
            judge = Judge(engine, CheckOptions(target="v5e", tiers=(0,)), Trusted.of_file(str(path), ROOT),
                          device=hosts(n), where="hosts", timeout_s=600.0)
            return await search_job.run_search(path, ROOT, options, LandscapeModel(), judge)
        finally:
            pool = next(iter(engine._devices.values()))
            await engine.close()
            assert pool.size == n

    return asyncio.run(go()), opened


def shape(graph) -> list:
    return [(n.id, n.parents, n.status, n.source,
             round(n.speedup, 9) if n.speedup is not None else None) for n in graph.nodes]


def test_search_gives_the_same_graph_and_winner_with_1_or_8_workers_and_a_lost_worker(tmp_path):
    one, opened1 = search_on(1, tmp_path)
    eight, opened8 = search_on(8, tmp_path, crash="tpu-3")
    assert len(opened1) == 1 and len(opened8) == 8
    assert sum(len(d.ran) > 0 for d in opened8) > 1  # the 8-worker run really spread its jobs
    assert shape(one) == shape(eight)
    assert one.best().id == eight.best().id and one.best().speedup == eight.best().speedup
    assert one.provenance == eight.provenance == f"device ({KIND})"


def eval_on(n: int):
    tasks = discover(str(DATA / "eval"))
    methods = {"files": cmd_eval.candidate_for("files"), "again": cmd_eval.candidate_for("files")}
    engine = Engine(checks=1, use_store=False,
                    backend_factory=lambda config, checks: local_backend(config, checks=checks, jobs=2))
    opened: list = []
    engine.device_opener = fake_opener(opened=opened)
    lines: list[str] = []

    async def go():
        try:
            return await run_eval(EvalJob(tasks, methods, chip="v5e", device=hosts(n), progress=lines.append),
                                  engine)
        finally:
            await engine.close()

    return asyncio.run(go()), opened, lines


def table(summaries) -> list:
    return [(s["method"], s.get("geomean_speedup"), [(t["task"], t["status"], t["correct"], t["speedup"],
                                                       t["provenance"]) for t in s["per_task"]]) for s in summaries]


def test_eval_gives_the_same_table_with_1_or_8_workers_and_shows_each_worker():
    one, opened1, _ = eval_on(1)
    eight, opened8, lines = eval_on(8)
    assert table(one) == table(eight)
    assert any(t["speedup"] for t in one[0]["per_task"])  # the table has device speedups to compare
    assert len(opened1) == 1 and len(opened8) == 8
    # every (method, task) pair's device job went through the pool: distinct candidates timed once each
    assert sum(len(d.ran) for d in opened8) == sum(len(d.ran) for d in opened1) > 0
    assert sum(1 for line in lines if line.startswith("device pool: w")) >= 8  # each worker's state


def agents_eval_on(n: int):
    from pallasite.agents.eval_agents import AgentMethod, AgentSpec
    from test_eval_agents import source

    tasks = discover(str(DATA / "eval_agents"))
    methods = {"zero-shot": AgentMethod(AgentSpec("zero-shot", samples=2), source(), "eval-pool", "zero-shot"),
               "beam": AgentMethod(AgentSpec("beam", search=SearchOptions(algo="beam", width=1, depth=1, branches=2)),
                                   source(), "eval-pool", "beam")}
    engine = Engine(checks=1, use_store=False,
                    backend_factory=lambda config, checks: local_backend(config, checks=checks, jobs=2))
    engine.device_opener = fake_opener()

    async def go():
        try:
            return await run_eval(EvalJob(tasks, methods, chip="v5e", device=hosts(n)), engine)
        finally:
            await engine.close()

    summaries = asyncio.run(go())
    winners = {(s["method"], t["task"]): (t["agent"]["text"], t["speedup"]) for s in summaries for t in s["per_task"]}
    return table(summaries), winners


def test_agent_methods_with_a_scripted_model_pick_the_same_winners_with_1_or_8_workers():
    one_table, one_winners = agents_eval_on(1)
    eight_table, eight_winners = agents_eval_on(8)
    assert one_table == eight_table and one_winners == eight_winners
    assert all(text for text, _ in one_winners.values())  # every method found a candidate for every task

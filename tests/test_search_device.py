"""Device timing wired into search and eval, over tests/fake_backend.py (scripted device medians).

A fake device answers the ``time`` op with a device Measurement whose median is a pure function of
the kernel's BLOCK_ROWS; a second fake answers ``interpret`` timings as a CPU-only worker would.
Checks: node speedups are device medians labelled "device (<kind>)" in the graph, the JSON and the
report; one device job per tested node (test and measure share it); CPU timings never rank; eval's
speedups are reference/candidate device medians, and a missing device timing is an error, never 1.0x.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.agents.search import SearchOptions
from pallasite.analysis.types import Measurement, Provenance
from pallasite.engine.checker import CheckOptions
from pallasite.engine.judge import Judge, Trusted
from pallasite.engine.engine import Engine
from pallasite.engine.eval_tasks import discover
from fake_backend import FakeStep, fake_backend
from pallasite.agents import search_job
from pallasite.wire import messages
from pallasite.server.commands import cmd_eval, flags
from pallasite.server import run_request
from test_search_iterate import LANDSCAPE, ROOT, LandscapeModel, rows

DATA = Path(__file__).parent / "data"
KIND = "TPU v5 lite (fake)"


def timed(median_ns: float, provenance=Provenance.DEVICE, kind=KIND) -> Measurement:
    return Measurement("ok", provenance, kind, "fake device time", (median_ns,) * 3, median_ns)


def device_script(provenance=Provenance.DEVICE, log=None):
    """The fake device: 100 us / LANDSCAPE[rows] for the candidate; the reference (eval) 100 us. It answers as
    a device worker's judge does (``judged_by``: runner/judging/judge.py): only the judge's verdicts rank."""

    def result(params):
        text = params.source.file.text
        n = rows(text) if "BLOCK_ROWS" in text else 8
        ref = timed(100e3, provenance) if params.reference is not None else None
        return messages.TimeResult(verdict="ok", entry="add", path=params.source.file.path,
                                   candidate=timed(100e3 / LANDSCAPE.get(n, 0.5), provenance), reference=ref,
                                   provenance=provenance.value, judged_by="the judge")  # plays the judge

    def script(params, purpose):
        if log is not None:
            log.append((type(params).OP, purpose))
        return FakeStep(result=result if isinstance(params, messages.TimeParams) else None)

    return script


def search_with(device, tmp_path, options):
    path = tmp_path / "add.py"
    path.write_text(ROOT)
    engine = Engine(use_store=False, backend_factory=lambda config, checks: fake_backend())

    async def go():
        try:
            judge = Judge(engine, CheckOptions(target="v5e", tiers=(0,)), Trusted.of_file(str(path), ROOT),
                          device=device, where="fake", timeout_s=600.0)
            return await search_job.run_search(path, ROOT, options, LandscapeModel(), judge)
        finally:
            await engine.close()
            await device.close()

    return asyncio.run(go())


def test_search_node_speedups_are_device_medians_named_by_the_device(tmp_path):
    log = []
    device = fake_backend(device_script(log=log))
    opts = SearchOptions(algo="beam", width=2, depth=2, branches=2, strategies=("double", "halve"), seed=1)
    g = search_with(device, tmp_path, opts)
    assert g.provenance == f"device ({KIND})" and g.root.time_s == pytest.approx(100e-6)
    measured = [n for n in g.nodes[1:] if n.ok]
    assert measured
    for n in measured:
        assert n.provenance == f"device ({KIND})"
        assert n.speedup == pytest.approx(LANDSCAPE[rows(n.source)])
    # one device job for the root, one per distinct tested source (its test and its measure share it, and
    # the judge's memo by candidate text answers a node that proposes a source already judged)
    tested = len({n.source for n in g.nodes[1:] if any(p["phase"] == "test" for p in n.phases)} - {ROOT})
    assert log.count(("time", "device")) == 1 + tested
    assert all(purpose == "device" for op, purpose in log if op == "time")
    report = run_request.write_outputs(g, "run1", tmp_path / "out", "t")
    assert f"device ({KIND})" in report.read_text()
    assert json.loads((tmp_path / "out" / "run1.json").read_text())["provenance"] == f"device ({KIND})"


def test_cpu_timings_from_a_device_backend_never_rank(tmp_path):
    device = fake_backend(device_script(Provenance.INTERPRET))
    g = search_with(device, tmp_path, SearchOptions(algo="parallel", trajectories=2, iterations=1,
                                                    strategies=("double",)))
    assert g.root.time_s is None and "not on a device" in g.root.error
    for n in g.nodes[1:]:
        assert n.speedup is None and n.status == "compiled, correct" and "not on a device" in n.error
    assert g.best().id == "root"


@pytest.mark.pipeline
def test_eval_speedups_are_device_medians_and_cpu_time_is_never_a_speedup(tmp_path):
    """Eval through the one verdict with a (fake) device: compiled by the real checker tiers, correct and
    timed by the device's time op; a device worker answering CPU timings gives no speedup (refused)."""
    from pallasite.agents.eval_job import EvalJob, run_eval

    tasks = discover(str(DATA / "eval"))
    methods = {"files": cmd_eval.candidate_for("files")}

    def go(script):
        device = fake_backend(script)

        async def run():
            try:
                return await run_eval(EvalJob(tasks, methods, chip="v5e", device=device, where="fake"))
            finally:
                await device.close()

        return asyncio.run(run())

    (summary,) = go(device_script())
    per = {t["task"]: t for t in summary["per_task"]}
    tuned = per["add_tuned"]
    assert tuned["correct"] and tuned["provenance"] == f"device ({KIND})" and tuned["speedup"] > 0
    assert per["scale_reference_only"]["status"] == "no candidate" and not per["scale_reference_only"]["correct"]
    assert summary["provenance"].startswith(f"device ({KIND}) medians")
    (cpu,) = go(device_script(Provenance.INTERPRET))
    assert cpu["geomean_speedup"] is None and "not TPU time" in cpu["speedup_refused"]
    assert {t["task"]: t for t in cpu["per_task"]}["add_tuned"]["speedup"] is None


def test_backend_flags_route_to_the_chosen_backend(tmp_path, monkeypatch):
    from pallasite.engine.workers import remote

    monkeypatch.setattr(remote, "ray_installed", lambda: True)  # settings only: no Ray runs (README's command has no ray extra)
    parser = argparse.ArgumentParser()
    flags.add_backend(parser, "search")
    assert run_request.device_settings(parser.parse_args([])) is None
    ray = run_request.device_settings(parser.parse_args(["--backend", "ray", "--ray-resources", "TPU=4"]))
    assert ray.kind == "ray" and ray.ray_resources == {"TPU": 4.0}
    with pytest.raises(ValueError, match="needs a host"):
        run_request.device_settings(parser.parse_args(["--backend", "ssh"]))
    ssh = run_request.device_settings(parser.parse_args(["--backend", "ssh", "--host", "tpu-vm"]))
    from pallasite.engine.workers.device import candidate_config
    from pallasite.engine.workers.remote import open_remote
    from pallasite.engine.workers.remote import where as device_where

    backend, where = open_remote(ssh, candidate_config(1024, 600.0)), device_where(ssh)
    assert where == "ssh:tpu-vm" and backend.config.command[0] == "ssh" and backend.config.platforms is None
    try:
        from pallasite.engine.workers.ray_backend import RayBackend
    except ImportError:  # pragma: no cover - ray is imported lazily by the backend, not here
        RayBackend = None
    backend, where = open_remote(ray, candidate_config(1024, 600.0)), device_where(ray)  # not started: no cluster is needed to route
    assert isinstance(backend, RayBackend) and backend.resources == {"TPU": 4.0} and where == "ray:local"
    # the CLI refuses a bad backend before doing anything
    path = tmp_path / "add.py"
    path.write_text(ROOT)
    for cmd in (["search", str(path), "--provider", "scripted", "--backend", "ssh"],
                ["eval", str(DATA / "eval"), "--backend", "ssh"]):
        proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", *cmd], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 2 and "needs a host" in proc.stderr, proc.stderr

"""Backends, jobs and the engine with the fake backend (tests/fake_backend.py): in-process workers
following a script, so scheduling, cancellation and crashes are tested in seconds without JAX."""

from __future__ import annotations

import asyncio
import os
import time

from pallasite.engine.workers.backend import Backend
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import Engine
from fake_backend import FakeStep, FakeWorker, fake_backend
from pallasite.engine.sources import sources_for
from pallasite.wire.messages import CheckParams, PingParams, Progress, SourceFile, Sources, Stage

DATA = os.path.join(os.path.dirname(__file__), "data", "compiler")
KERNEL = os.path.join(DATA, "store_shape_fixed.py")  # a real kernel with a task: tiers 1-2 are asked for


def _run(coro):
    return asyncio.run(coro)


def _long_jobs(params, purpose):
    """Jobs take 30 s; everything else answers at once."""
    return FakeStep(delay_s=30.0) if purpose == "job" else FakeStep()


def _engine(script, **sizes) -> Engine:
    return Engine(backend_factory=lambda config, checks: fake_backend(script, {"check": checks, **sizes}),
                  use_store=False)


def test_the_fake_and_local_backends_fit_the_seam():
    from pallasite.engine.workers.client import WorkerConfig
    from pallasite.engine.workers.pool import local_backend

    assert isinstance(fake_backend(), Backend)
    assert isinstance(local_backend(WorkerConfig()), Backend)  # nothing starts until a request


def test_an_on_save_check_completes_while_a_30_second_job_holds_another_worker():
    async def go():
        engine = _engine(_long_jobs)
        try:
            options = CheckOptions(target="v5e", tiers=(0, 1, 2))
            backend = engine.backend(options)
            job = engine.jobs.submit("tier3", KERNEL, lambda report: backend.request(
                CheckParams(source=sources_for(KERNEL), tiers=(3,)), purpose="job", on_progress=report))
            await asyncio.sleep(0.05)
            assert job.state == "running" and backend.busy("job") == 1
            started = time.monotonic()
            report = await engine.check(KERNEL, options)
            took = time.monotonic() - started
            still = job.state
            engine.jobs.cancel(job.id)
            await engine.jobs.wait(job.id)
            return report, took, still, job
        finally:
            await engine.close()

    report, took, still, job = _run(go())
    assert took < 5 and still == "running"  # the check did not wait behind the job
    assert [dict(k.tiers)[1] for k in report.kernels] == ["ok"] and [dict(k.tiers)[2] for k in report.kernels] == ["ok"]
    assert job.state == "cancelled"


def test_cancelling_a_job_frees_its_worker():
    async def go():
        engine = _engine(lambda params, purpose: FakeStep(delay_s=30.0 if isinstance(params, CheckParams) else 0.0),
                         job=1)
        try:
            backend = engine.backend(CheckOptions())
            long = engine.jobs.submit("tune", KERNEL, lambda report: backend.request(
                CheckParams(source=sources_for(KERNEL)), purpose="job"))
            await asyncio.sleep(0.05)
            waiting = engine.jobs.submit("ping", None, lambda report: backend.request(PingParams(), purpose="job"))
            await asyncio.sleep(0.05)
            assert waiting.state == "running" and waiting.result is None  # queued behind the long job
            started = time.monotonic()
            assert engine.jobs.cancel(long.id)
            done = await engine.jobs.wait(waiting.id)
            [worker] = backend.workers("job")
            return long, done, time.monotonic() - started, worker, backend.busy("job")
        finally:
            await engine.close()

    long, done, took, worker, busy = _run(go())
    assert long.state == "cancelled" and long.finished is not None
    assert done.state == "done" and done.result.ok and took < 2  # the freed worker served the next job
    assert worker.cancelled == 1 and worker.served == 1 and busy == 0


def test_a_worker_crash_during_a_job_fails_that_job_and_leaves_the_others_running():
    def script(params, purpose):
        if isinstance(params, CheckParams) and params.source.path.endswith("crashes.py"):
            return FakeStep(delay_s=0.2, crash=True)
        return FakeStep(delay_s=0.6)

    async def go():
        engine = _engine(script, job=2)
        try:
            backend = engine.backend(CheckOptions())

            def submit(name):
                params = CheckParams(source=Sources(SourceFile(path=f"/k/{name}", text="x = 1\n")))
                return engine.jobs.submit("tier3", name, lambda report: backend.request(params, purpose="job"))

            crashing, healthy = submit("crashes.py"), submit("fine.py")
            check = asyncio.ensure_future(engine.check(KERNEL, CheckOptions(target="v5e", tiers=(0, 1))))
            await asyncio.sleep(0.4)
            mid = (crashing.state, healthy.state)
            await engine.jobs.wait(healthy.id)
            return crashing, healthy, mid, await check, backend.workers("job")
        finally:
            await engine.close()

    crashing, healthy, mid, report, workers = _run(go())
    assert mid == ("failed", "running")  # the crash failed its own job only, at once
    assert crashing.failure == "crashed" and "killed by SIGKILL" in crashing.error
    assert healthy.state == "done" and healthy.result.ok
    assert sum(w.crashes for w in workers) == 1 and [dict(k.tiers)[1] for k in report.kernels] == ["ok"]


def test_the_device_worker_runs_timings_one_at_a_time():
    peak = []

    def script(params, purpose):
        return FakeStep(delay_s=0.15)

    async def go():
        backend = fake_backend(script)

        async def one():
            reply_task = asyncio.ensure_future(backend.request(PingParams(), purpose="device"))
            while not reply_task.done():
                peak.append(backend.busy("device"))
                await asyncio.sleep(0.01)
            return reply_task.result()

        started = time.monotonic()
        replies = await asyncio.gather(one(), one(), one())
        took = time.monotonic() - started
        await backend.close()
        return replies, took, backend.workers("device")

    replies, took, workers = _run(go())
    assert [r.status for r in replies] == ["ok"] * 3
    assert max(peak) == 1 and took >= 0.45 and len(workers) == 1


def test_a_purpose_without_workers_is_a_clear_not_started_reply():
    reply = _run(fake_backend(sizes={"device": 0}).request(PingParams(), purpose="device"))
    assert reply.status == "not_started" and "no 'device' worker" in reply.message


def test_describe_says_where_and_what_after_start():
    async def go():
        backend = fake_backend()
        before = backend.describe()
        after = await backend.start()
        await backend.close()
        return before, after

    before, after = _run(go())
    assert before.kind == "fake" and before.protocol is None and before.workers == 3
    assert after.protocol == 2 and after.devices == ("cpu",) and after.versions["python"] == "fake"


def test_progress_reaches_the_job_record():
    report = Progress(stage=Stage.TIER, message="tier 3: kernel", tier=3, entry="kernel", fraction=0.5)

    async def go():
        engine = _engine(lambda params, purpose: FakeStep(delay_s=0.1, progress=(report,)))
        try:
            backend = engine.backend(CheckOptions())
            job = engine.jobs.submit("tier3", KERNEL, lambda tell: backend.request(PingParams(), purpose="job",
                                                                                    on_progress=tell))
            return await engine.jobs.wait(job.id)
        finally:
            await engine.close()

    job = _run(go())
    assert job.progress == report and job.state == "done"


def test_check_paths_runs_files_concurrently_and_reports_in_the_given_order(tmp_path):
    names = ["a.py", "b.py", "c.py", "d.py"]
    delays = {"a.py": 0.4, "b.py": 0.1, "c.py": 0.3, "d.py": 0.05}  # finish out of order
    with open(KERNEL, encoding="utf-8") as f:
        text = f.read()
    paths = []
    for name in names:
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    peak = []

    def script(params, purpose):
        return FakeStep(delay_s=delays[os.path.basename(params.source.path)])

    async def go():
        engine = _engine(script)
        engine.checks = 2
        try:
            task = asyncio.ensure_future(engine.check_paths(paths, CheckOptions(target="v5e", tiers=(0, 1))))
            while not task.done():
                if engine.current_backend is not None:
                    peak.append(engine.current_backend.busy("check"))
                await asyncio.sleep(0.01)
            return task.result()
        finally:
            await engine.close()

    started = time.monotonic()
    reports = _run(go())
    took = time.monotonic() - started
    assert [r.path for r in reports] == paths
    assert max(peak) == 2 and took < sum(delays.values())  # two at a time, not one after another


def test_a_fake_worker_restarts_after_a_crash():
    async def go():
        worker = FakeWorker(lambda params, purpose: FakeStep(crash=True), "check")
        first = await worker.request(PingParams())
        hello = worker.handshake
        second = await worker.request(PingParams())
        return first, hello, second, worker

    first, hello, second, worker = _run(go())
    assert first.status == second.status == "crashed" and hello is None and worker.starts == 2


def test_hovers_read_the_results_store_through_one_connection(tmp_path, monkeypatch):
    from pallasite.analysis.types import Finding, ResultKey, Span
    from pallasite.engine import store_cache

    (tmp_path / ".pallasite").mkdir()  # the workspace (an empty store folder: no store file yet)
    kernel = tmp_path / "k.py"
    kernel.write_text("x = 1\n")
    opened = []
    real = store_cache.ResultsStore

    def counting(*args, **kwargs):
        opened.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(store_cache, "ResultsStore", counting)

    async def go():
        engine = Engine(backend_factory=lambda config, checks: fake_backend())
        try:
            assert engine.stored_checks(str(kernel)) == []  # no store yet: none is created for a hover
            assert not (tmp_path / ".pallasite" / "results.sqlite").exists() and opened == []
            key = ResultKey(code_hash="source:ab", kernel="add", inputs=(((8, 128), "float32"),), chip="v5e",
                            jax_version="0.10.2", libtpu_version=None)
            engine.store_for(str(kernel)).put(key, 1, "error", (Finding("PLS101", "tiling", Span(3, 0, 3, 5), tier=1),),
                                              path=str(kernel))
            return [engine.stored_checks(str(kernel)) for _ in range(50)]
        finally:
            await engine.close()

    reads = _run(go())
    assert len(opened) == 1  # one connection for the record and all 50 hovers
    assert all([(r.kernel, r.tier, r.status) for r in found] == [("add", 1, "error")] for found in reads)


def test_closing_the_backend_ends_waiting_requests_without_restarting_workers():
    async def go():
        backend = fake_backend(lambda params, purpose: FakeStep(delay_s=0.3))
        running = asyncio.ensure_future(backend.request(PingParams()))
        await asyncio.sleep(0.05)
        waiting = asyncio.ensure_future(backend.request(PingParams()))
        await asyncio.sleep(0.05)
        await backend.close()
        return await running, await waiting, backend.workers("check")

    running, waiting, [worker] = _run(go())
    assert running.status == "ok" and waiting.status == "cancelled" and "closed" in waiting.message
    assert worker.served == 1 and worker.starts == 1

"""Tune's estimating workers stay small (issue 44: `pallasite tune` under 2 GiB, the CLI and its workers): the
reference's cost and the chip probe (libtpu, ~1 GiB the worker keeps) go alone in the first request, after which
the pool's idle job workers are replaced; no estimate request carries more than ``PER_REQUEST`` configurations,
and the client replaces a worker left holding more than ``REPLACE_AFTER_MB`` after an ``estimate`` request of
configurations (not after one that priced a reference: that worker keeps serving the judge's estimates warm), so
what jax keeps of every traced configuration goes back between requests. The estimates, and so the ranking, do
not depend on the split."""

from __future__ import annotations

import pytest

import asyncio
import os

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

import pytest  # noqa: E402

from pallasite.engine.sources import sources_for  # noqa: E402
from pallasite.engine.tuning.tune import TuneOptions, tune  # noqa: E402
from pallasite.engine.tuning.tune_workers import worker_estimator  # noqa: E402
from pallasite.runner.tune_ops import handle_estimate  # noqa: E402
from pallasite.wire.messages import EstimateParams, PingParams  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "tune")


class Recording:
    """A backend answering ``estimate`` requests in this process, keeping what each asked."""

    class Reply:
        def __init__(self, result):
            self.ok, self.result, self.why = True, result, None

    def __init__(self) -> None:
        self.asked: list[tuple[bool, int] | str] = []  # (reference, configurations) per request, "replaced"

    async def request(self, params, **_):
        assert isinstance(params, EstimateParams)
        self.asked.append((params.reference, len(params.configs)))
        return self.Reply(handle_estimate(params))

    async def replace_idle(self, purpose):
        assert purpose == "job"
        self.asked.append("replaced")
        return 1


def _tuned(monkeypatch, per_request: int):
    from pallasite.engine.tuning import tune_workers

    monkeypatch.setattr(tune_workers, "PER_REQUEST", per_request)
    path = os.path.join(DATA, "matmul.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    backend = Recording()
    options = TuneOptions(chip="v5e", verify=0, estimates=48)
    report = asyncio.run(tune(path, text, options, worker_estimator(backend, path, text, "v5e", None, timeout_s=60.0,
                                                                    parallel=2)))
    return backend.asked, report


@pytest.mark.pipeline
def test_the_reference_goes_alone_and_no_estimate_request_carries_more_than_per_request(monkeypatch):
    asked, report = _tuned(monkeypatch, 4)
    assert asked[:2] == [(True, 1), "replaced"]  # the reference and the probe alone, then fresh workers
    assert all(not ref and 1 <= n <= 4 for ref, n in asked[2:]), asked
    assert sum(n for _, n in asked[2:]) >= 20  # the space was explored through many small requests
    # the same ranking as when every call went out in two requests
    _, whole = _tuned(monkeypatch, 10**6)
    assert report.best == whole.best
    assert [(o.config, o.verdict, o.estimate_s, o.duplicate_of) for o in report.outcomes] == \
        [(o.config, o.verdict, o.estimate_s, o.duplicate_of) for o in whole.outcomes]


@pytest.mark.pipeline
@pytest.mark.parametrize("after_mb, reference, replaced", [(1, False, True), (10**6, False, False), (1, True, False)])
def test_a_worker_left_holding_more_than_replace_after_mb_after_an_estimate_is_replaced(monkeypatch, after_mb,
                                                                                         reference, replaced):
    from pallasite.engine.workers import client as client_mod
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig

    monkeypatch.setattr(client_mod, "REPLACE_AFTER_MB", {"estimate": after_mb})
    path = os.path.join(DATA, "matmul.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    params = EstimateParams(source=sources_for(path, text), chip="v5e", configs=({"bm": 128},), kinds={},
                            probe=False, reference=reference)

    async def run():
        async with WorkerClient(WorkerConfig(timeout_s=120.0, memory_mb=4096)) as worker:
            assert (await worker.request(PingParams())).ok
            pinged = worker.pid if worker.alive else None  # other ops keep the REPLACE_SHARE rule only
            reply = await worker.request(params)
            assert reply.ok, reply.message
            assert reply.result.estimates[0].status == "ok"
            estimated = worker.pid if worker.alive else None
            assert (await worker.request(PingParams())).ok
            return pinged, estimated, worker.pid, worker.restarts

    pinged, estimated, after, restarts = asyncio.run(run())
    assert pinged is not None  # a ping leaves the worker (REPLACE_SHARE of 4096 MiB only)
    assert (estimated is None, after != pinged, restarts) == (replaced, replaced, int(replaced))


def test_a_judges_estimate_of_the_file_alone_keeps_the_warm_worker():
    """The judge estimates each candidate through the same estimator (``estimate([], {})``): its worker, libtpu
    loaded, is not replaced after it."""
    path = os.path.join(DATA, "matmul.py")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    backend = Recording()
    result = asyncio.run(worker_estimator(backend, path, text, "v5e", None, timeout_s=60.0)([], {}))
    assert backend.asked == [(True, 0)] and result.estimates[0].status == "ok"


def test_replace_idle_replaces_a_lanes_idle_workers_and_the_next_request_runs_on_a_fresh_one():
    from fake_backend import fake_backend

    async def run():
        backend = fake_backend(sizes={"job": 2})
        try:
            assert (await backend.request(PingParams(), purpose="job")).ok
            (before,) = backend.workers("job")
            assert await backend.replace_idle("job") == 1
            (fresh,) = backend.workers("job")
            assert fresh is not before and before.handshake is None and fresh.starts == 0  # started by a request
            assert (await backend.request(PingParams(), purpose="job")).ok
            (after,) = backend.workers("job")
            return after is fresh and fresh.served == 1
        finally:
            await backend.close()

    assert asyncio.run(run())

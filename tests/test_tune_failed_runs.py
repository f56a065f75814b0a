"""A failed or partial tuning run is never stored as finished (issue 44): `tune --backend ray` without Ray
exited 0, said "measured 8 configurations" and stored the failed run as finished, which later runs reused.
Now: a backend that is not installed is refused before anything runs (non-zero exit, a clear error);
evaluations the backend did not finish (status "crash") are not stored as the configuration's result,
a run with any of them is not stored as finished, and a run where all of them failed is an error."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.types import Measurement, Provenance  # noqa: E402
from pallasite.engine.tuning.tune import TuneError, TuneOptions, tune  # noqa: E402
from pallasite.knowledge.store import ResultsStore  # noqa: E402

from test_tune import _estimator, _read  # noqa: E402


def _flaky_timer(log, crash=lambda config: True):
    """A device that times every configuration, except those ``crash`` names: the backend fails (a lost
    worker, Ray missing) and answers status "crash", as engine/tuning/tune_workers.worker_timer does for a reply not ok."""
    async def timer(configs):
        out = []
        for c in configs:
            log.append(tuple(sorted(c.items())))
            if crash(c):
                out.append(Measurement(status="crash", provenance=Provenance.DEVICE, device_kind="v5e",
                                       method="time op", error="the ray backend needs Ray: pip install ray"))
                continue
            t = 1e-4 * (1 + c["bm"] / 512)
            out.append(Measurement(status="ok", provenance=Provenance.DEVICE, device_kind="TPU v5 lite",
                                   method="fake device", median_ns=t * 1e9, samples_ns=(t * 1e9,)))
        return out
    return timer


def test_a_run_where_every_evaluation_failed_is_an_error_and_stores_nothing(tmp_path):
    path, text = _read("matmul")
    make, _ = _estimator()
    options = TuneOptions(chip="v5e", backend="ray", budget=8, batch=4)
    with ResultsStore(tmp_path / "r.sqlite") as store:
        log: list = []
        with pytest.raises(TuneError, match="every device evaluation failed on the ray backend"):
            asyncio.run(tune(path, text, options, make(path, text), timer=_flaky_timer(log), store=store))
        assert len(log) == 8
        again: list = []  # nothing was stored: the next run times them all again (it reused the failed run)
        with pytest.raises(TuneError):
            asyncio.run(tune(path, text, options, make(path, text), timer=_flaky_timer(again), store=store))
        assert sorted(again) == sorted(log)


def test_a_partial_run_is_not_stored_as_finished_and_the_next_retries_what_failed(tmp_path):
    path, text = _read("matmul")
    make, _ = _estimator()
    options = TuneOptions(chip="v5e", backend="ray", budget=8, batch=4)
    with ResultsStore(tmp_path / "r.sqlite") as store:
        first: list = []
        report = asyncio.run(tune(path, text, options, make(path, text), store=store,
                                  timer=_flaky_timer(first, crash=lambda c: c["bm"] == 512)))
        crashed = {c for c in first if dict(c)["bm"] == 512}
        assert crashed and report.best is not None and dict(report.best)["bm"] != 512
        assert any("did not finish" in n and "not stored as finished" in n for n in report.notes)
        second: list = []
        again = asyncio.run(tune(path, text, options, make(path, text), store=store, timer=_flaky_timer(second, crash=lambda c: False)))
        assert second and again.strategy != "reused"  # the search went on; the partial run was not reused
        assert not set(second) & (set(first) - crashed)  # what finished is not timed again
        for config in crashed:  # what did not finish was not stored as the configuration's failure
            o = again.outcome(config)
            assert o is not None and not (o.verdict.timing is None and o.reused)
        third: list = []  # that run finished: it is reused
        asyncio.run(tune(path, text, options, make(path, text), store=store, timer=_flaky_timer(third, crash=lambda c: False)))
        assert third == []


def test_tune_on_ray_without_ray_is_a_clear_error(tmp_path, capsys, monkeypatch):
    from pallasite.server.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as without the package
    path = tmp_path / "matmul.py"
    shutil.copy(Path(__file__).parent / "data" / "tune" / "matmul.py", path)
    (tmp_path / ".pallasite").mkdir()
    assert main(["tune", str(path), "--backend", "ray", "--target", "v5e"]) != 0
    captured = capsys.readouterr()
    assert "needs Ray" in captured.err and "pip install" in captured.err
    assert "measured" not in captured.out + captured.err
    assert not (tmp_path / ".pallasite" / "results.sqlite").exists()  # refused before anything ran or was stored

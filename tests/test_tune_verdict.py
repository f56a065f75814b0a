"""Tune held to the one verdict (issue 33): what it calls best compiled for the chip, a starting
configuration that does not compile is said so in the headline, a rerun from the store answers what
the first run answered, device timings are keyed by what the worker reported, estimates are stored
once under one model name. Estimates from the real cost model in this process; the compiler and the
device are stand-ins (the compiler's verdict is a CompileResult, as the checker's would be)."""

from __future__ import annotations

import asyncio
import os

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.types import Measurement, Provenance  # noqa: E402
from pallasite.analysis.verdict import CompileResult  # noqa: E402
from pallasite.engine.tuning.tune import COMPILE_METHOD, COST_MODEL_METHOD, TuneOptions, tune  # noqa: E402
from pallasite.knowledge.store import ResultsStore  # noqa: E402

from test_tune import _estimator, _read, _timer  # noqa: E402


def _compiler(log, refuse=lambda text: False):
    """Compiles every configured text for v5e except those ``refuse`` names (VMEM out of memory)."""
    async def compile_text(text):
        log.append(text)
        if refuse(text):
            return CompileResult.failed("1 error(s): E1001", "line 30: E1001: scoped VMEM out of memory", chip="v5e",
                                        tiers=(0, 1, 2))
        return CompileResult.passed("v5e")
    return compile_text


def _with_reference(path, text, calls):
    """The worker's estimator as worker_estimator asks it: the first call also costs the reference."""
    from pallasite.engine.sources import sources_for
    from pallasite.runner.tune_ops import handle_estimate
    from pallasite.wire.messages import EstimateParams

    async def estimate(configs, kinds):
        calls["n"] += 1
        return handle_estimate(EstimateParams(source=sources_for(path, text), chip="v5e", configs=tuple(configs),
                                              kinds=dict(kinds), probe=False, reference=True))
    return estimate


def _bk(text):
    import re

    return int(re.search(r"bk: int = (\d+)", text).group(1))


def test_the_best_estimate_that_does_not_compile_for_the_chip_is_never_the_pick(tmp_path):
    """Tune's pick was never put through tier 2: it applied blocks that `check --target v5e` rejects."""
    path, text = _read("matmul")
    make, _ = _estimator()
    log = []
    first = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0), make(path, text)))
    bad = dict(first.best)["bk"]  # the cost model's favourite: say it does not compile
    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0), make(path, text),
                              compiler=_compiler(log, lambda t: _bk(t) == bad)))
    assert report.best is not None and dict(report.best)["bk"] != bad
    assert report.best_compile is not None and report.best_compile.ok is True
    refused = report.outcome(first.best)
    assert refused.verdict.status() == "not compiled" and refused.verdict.text().startswith("not compiled: 1 error(s): E1001")


def test_a_starting_configuration_that_does_not_compile_is_said_in_the_headline(tmp_path):
    from pallasite.server.commands.cmd_tune import format_report

    path, text = _read("matmul")
    make, _ = _estimator()
    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0), make(path, text),
                              compiler=_compiler([], lambda t: _bk(t) == 512)))  # the current bk
    assert report.current_compile.ok is False and report.speedup_vs_current() is None
    head = format_report(report, top=3).splitlines()
    said = [line for line in head if line.startswith("the current configuration bk=512, bm=256, bn=256")]
    assert said and "not compiled: 1 error(s): E1001" in said[0]
    assert not any("the current configuration 0." in line or "the current configuration 1." in line for line in head)


def test_a_rerun_from_the_store_keeps_its_reference_comparison_and_compile_results(tmp_path):
    """The same tune run a second time lost its reference comparison ("none was made")."""
    path, text = _read("matmul")
    calls = {"n": 0}
    with ResultsStore(tmp_path / "r.sqlite") as store:
        log = []
        first = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0), _with_reference(path, text, calls),
                                 store=store, compiler=_compiler(log)))
        compiled = len(log)
        again = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0), _with_reference(path, text, calls),
                                 store=store, compiler=_compiler(log)))
        assert calls["n"] == 1 and len(log) == compiled  # neither estimated nor compiled again
        assert first.best_vs_reference is not None and first.best_vs_reference.speedup is not None
        assert again.best_vs_reference == first.best_vs_reference
        assert again.current_vs_reference == first.current_vs_reference
        assert again.best == first.best and again.best_compile == first.best_compile
        assert store.verdicts(method=COMPILE_METHOD)


def test_device_timings_are_keyed_by_the_worker_and_estimates_stored_once(tmp_path):
    path, text = _read("matmul")
    make, _ = _estimator()
    with ResultsStore(tmp_path / "r.sqlite") as store:
        report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", backend="fake", budget=6, batch=2),
                                  make(path, text), timer=_timer([]), store=store))
        rows = store.measurements(path=path)
        assert rows and all(r.key.chip == "TPU v5 lite" for r in rows)  # the worker's device kind, not "v5e"
        assert report.device_kind == "TPU v5 lite"
        asyncio.run(tune(path, text, TuneOptions(chip="v5e"), make(path, text), store=store))
        models = {r.model for r in store.estimates(path=path)}
        assert models == {COST_MODEL_METHOD}  # once, under the cost model's name (was a second, "autotune ...")
        assert all(r.measurement.provenance is Provenance.DEVICE for r in store.measurements(path=path))


def test_versions_in_the_key_are_the_workers(tmp_path):
    path, text = _read("matmul")
    make, _ = _estimator()

    async def timer(configs):
        t = 1e-4
        return [Measurement(status="ok", provenance=Provenance.DEVICE, device_kind="TPU v6 lite", method="fake",
                            median_ns=t * 1e9, jax_version="9.9.9", libtpu_version="7.7.7") for _ in configs]

    with ResultsStore(tmp_path / "r.sqlite") as store:
        asyncio.run(tune(path, text, TuneOptions(chip="v5e", backend="fake", budget=2, batch=2), make(path, text),
                         timer=timer, store=store))
        keys = {(r.key.chip, r.key.jax_version, r.key.libtpu_version) for r in store.measurements(path=path)}
        assert keys == {("TPU v6 lite", "9.9.9", "7.7.7")}

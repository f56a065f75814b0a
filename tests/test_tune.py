"""Autotuning: tunables found in the source, feasibility before compiling, the search, storing
and resuming, and the exact edit that applies the winner; each configuration's outcome a Verdict.
Device timings come from a fake timer (a deterministic function of the configuration, provenance
"device"); estimates from the real cost model run in this process."""

from __future__ import annotations

import asyncio
import os

import pytest

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.feasibility import rejections  # noqa: E402
from pallasite.analysis.source import Source, apply_edits  # noqa: E402
from pallasite.analysis.tunables import apply_config, default_candidates, find_tunables  # noqa: E402
from pallasite.analysis.types import BlockCost, CallCost, CostEstimate, Measurement, Provenance  # noqa: E402
from pallasite.analysis.verdict import timing_of  # noqa: E402
from pallasite.engine.tuning.tune import TuneError, TuneOptions, tune  # noqa: E402
from pallasite.engine.tuning.tune_search import neighbours, search  # noqa: E402
from pallasite.knowledge.store import ResultsStore  # noqa: E402
from pallasite.engine.tuning.judge_tune import config_timer  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "tune")


def _read(name: str) -> tuple[str, str]:
    path = os.path.join(DATA, f"{name}.py")
    with open(path, encoding="utf-8") as f:
        return path, f.read()


# --------------------------------------------------------------------------- tunables and apply


def test_tunables_of_each_kind_with_declared_or_default_candidates():
    path, text = _read("matmul")
    found = {t.name: t for t in find_tunables(Source(text), path)}
    assert {n: (t.kind, t.default, t.candidates) for n, t in found.items()} == {
        "bm": ("keyword", 256, (128, 256, 512)), "bn": ("keyword", 256, (128, 256, 512)),
        "bk": ("keyword", 512, (256, 512, 1024, 2048))}
    path, text = _read("reduction")
    found = {t.name: t for t in find_tunables(Source(text), path)}
    assert {n: (t.kind, t.default) for n, t in found.items()} == {
        "block_rows": ("tuned_params", 64), "block_cols": ("tuned_params", 512)}
    assert found["block_rows"].candidates == default_candidates(64) == (16, 32, 64, 128, 256)
    path, text = _read("elementwise")
    found = {t.name: t for t in find_tunables(Source(text), path, declared={"BLOCK_COLS": [512, 1024]})}
    assert found["BLOCK_COLS"].kind == "constant" and found["BLOCK_COLS"].candidates == (512, 1024)
    assert found["block_rows"].kind == "keyword"


def test_apply_writes_exactly_the_changed_literals():
    path, text = _read("matmul")
    tunables = find_tunables(Source(text), path)
    edits = apply_config(tunables, {"bm": 512, "bn": 256, "bk": 2048})
    assert len(edits) == 2  # bn unchanged: no edit
    expected = text.replace("def matmul(x, y, *, bm: int = 256, bn: int = 256, bk: int = 512):",
                            "def matmul(x, y, *, bm: int = 512, bn: int = 256, bk: int = 2048):")
    assert apply_edits(text, edits) == expected != text
    path, text = _read("reduction")
    edits = apply_config(find_tunables(Source(text), path), {"block_rows": 128, "block_cols": 512})
    assert apply_edits(text, edits) == text.replace('{"block_rows": 64,', '{"block_rows": 128,')
    path, text = _read("prefetch")
    edits = apply_config(find_tunables(Source(text), path), {"BLOCK_ROWS": 32})
    assert apply_edits(text, edits) == text.replace("BLOCK_ROWS = 16", "BLOCK_ROWS = 32")
    with pytest.raises(ValueError, match="not a tunable"):
        apply_config(find_tunables(Source(text), path), {"nope": 1})


# --------------------------------------------------------------------------- feasibility


def _estimate(blocks, vmem=0, limit=None, status="ok"):
    call = CallCost(kernel="k", grid=(2,), steps=2, blocks=tuple(blocks), scratch_bytes=0, vmem_bytes=vmem,
                    vmem_limit_bytes=limit, hbm_bytes=0, flops=0, mxu_flops=0, transcendentals=0, mxu_efficiency=1.0)
    return CostEstimate(chip="v5e", config=(), status=status, calls=(call,), error="boom" if status != "ok" else None)


def _block(block, array, dtype="float32", space="vmem"):
    return BlockCost("in", 0, "args[0]", array, block, dtype, space, 2, 1, 0)


def test_feasibility_names_the_right_reason():
    ok = _estimate([_block((8, 128), (64, 256))])
    assert rejections(ok, 16 << 20) == ()
    # a block that does not divide its array (or exceeds it) is padded by the compiler, not refused
    assert rejections(_estimate([_block((24, 128), (64, 256))]), None) == ()
    (r,) = rejections(_estimate([_block((8, 96), (64, 192))]), None)
    assert r.reason == "tiling" and "not a multiple of 128" in r.message
    (r,) = rejections(_estimate([_block((8, 128), (64, 256), dtype="int8")]), None)
    assert r.reason == "tiling" and "rows 8 is not a multiple of 32 (int8 tiling)" in r.message
    assert rejections(_estimate([_block((64, 128), (64, 256), dtype="int8")]), None) == ()  # whole dim
    assert rejections(_estimate([_block((8, 96), (64, 192), space="any")]), None) == ()  # not pipelined
    (r,) = rejections(_estimate([_block((8, 128), (64, 256))], vmem=20 << 20), 16 << 20)
    assert r.reason == "vmem" and "20.00 MiB exceed the chip's scoped-VMEM limit 16.00 MiB" in r.message
    (r,) = rejections(_estimate([_block((8, 128), (64, 256))], vmem=20 << 20, limit=8 << 20), 64 << 20)
    assert r.reason == "vmem" and "its vmem_limit_bytes" in r.message
    (r,) = rejections(_estimate([], status="trace_error"), None)
    assert r.reason == "trace"


# --------------------------------------------------------------------------- search


def _space(n1: int, n2: int):
    return [(("a", 2 ** i), ("b", 2 ** j)) for i in range(n1) for j in range(n2)]


def test_small_space_is_exhaustive_and_large_one_stays_in_budget():
    small = _space(3, 4)
    seen = []

    async def evaluate(cs):
        seen.extend(cs)
        return [float(dict(c)["a"] + dict(c)["b"]) for c in cs]

    r = asyncio.run(search(small, {c: 1.0 for c in small}, evaluate))
    assert r.strategy == "exhaustive" and sorted(seen) == sorted(small)
    big = _space(8, 8)
    seen.clear()
    truth = {c: abs(dict(c)["a"] - 16) + abs(dict(c)["b"] - 4) + 1.0 for c in big}

    async def device(cs):
        seen.extend(cs)
        return [truth[c] for c in cs]

    skewed = {c: t * (1.0 + 0.3 * (dict(c)["a"] == 32)) for c, t in truth.items()}  # the model's own errors
    r = asyncio.run(search(big, skewed, device, budget=16))
    assert r.strategy == "cost-model seeded" and len(seen) <= 16 == r.budget and len(set(seen)) == len(seen)
    assert r.best[0] == (("a", 16), ("b", 4))
    assert len(neighbours((("a", 16), ("b", 4)), big)) == 4


# --------------------------------------------------------------------------- the whole tune, stored


_ESTIMATES: dict = {}


def _estimator():
    from pallasite.runner.tune_ops import handle_estimate

    calls = {"n": 0}

    from pallasite.engine.sources import sources_for
    from pallasite.wire.messages import EstimateParams

    def make(path, text, chip="v5e"):
        async def estimate(configs, kinds):
            calls["n"] += 1
            key = (path, text, chip, repr(configs), repr(sorted(kinds.items())))
            if key not in _ESTIMATES:  # deterministic: traced once per test session
                _ESTIMATES[key] = handle_estimate(EstimateParams(
                    source=sources_for(path, text), chip=chip, configs=tuple(configs), kinds=dict(kinds), probe=False))
            return _ESTIMATES[key]
        return estimate

    return make, calls


class Interrupted(Exception):
    pass


def _timer(log, stop_after=None):
    async def timer(configs):
        out = []
        for c in configs:
            if stop_after is not None and len(log) >= stop_after:
                raise Interrupted()
            log.append(tuple(sorted(c.items())))
            d = dict(c)  # a fake device that likes bm=256, bn=512, bk=1024
            t = 1e-4 * (1 + abs(d["bm"] - 256) / 256 + abs(d["bn"] - 512) / 512 + abs(d["bk"] - 1024) / 1024)
            out.append(Measurement(status="ok", provenance=Provenance.DEVICE, device_kind="TPU v5 lite",
                                   method="fake device", median_ns=t * 1e9, samples_ns=(t * 1e9,)))
        return out
    return timer


def test_estimate_only_ranking_is_labelled_and_stored_and_costs_nothing_twice(tmp_path):
    path, text = _read("matmul")
    make, calls = _estimator()
    with ResultsStore(tmp_path / "r.sqlite") as store:
        options = TuneOptions(chip="v5e")
        first = asyncio.run(tune(path, text, options, make(path, text), store=store))
        assert first.best_provenance == "estimate (v5e)" and first.evaluations == 0
        assert all(o.verdict.timing.provenance == "estimate" and o.measured_s is None for o in first.outcomes)
        assert first.best == min((o for o in first.outcomes), key=lambda o: o.estimate_s).config
        assert calls["n"] == 1
        again = asyncio.run(tune(path, text, options, make(path, text), store=store))
        assert calls["n"] == 1  # the unchanged kernel's estimates came from the store: no worker
        assert again.best == first.best and any("reused" in n for n in again.notes)
        edited = text.replace("TOLERANCE = ", "# edited\nTOLERANCE = ")
        asyncio.run(tune(path, edited, options, make(path, edited), store=store))
        assert calls["n"] == 2  # a changed file is estimated again


def test_infeasible_configs_are_rejected_before_any_timing(tmp_path):
    path, text = _read("matmul")
    make, _ = _estimator()
    log = []
    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", declared={"bm": [100, 256]}), make(path, text),
                              timer=_timer(log)))
    rejected = [o for o in report.outcomes if o.verdict.compile.ok is False]
    # bm=100: 3 bn x 4 bk. Each is exported for the TPU to be priced (the one cost model), and Mosaic's lowering
    # refuses the block: no estimate, with Mosaic's words (the traced pricer priced them and the tiling
    # pre-check caught them after)
    assert len(rejected) == 12 and report.rejected == {"trace": 12}
    assert all(o.verdict.status() == "not compiled" and o.verdict.timing is None for o in rejected)
    assert all(o.verdict.text().startswith("not compiled: no estimate: the program does not lower for the TPU")
               and "divisible by 8 and 128" in o.verdict.text() for o in rejected)
    assert not any(dict(c)["bm"] == 100 for c in log)


def test_interrupted_search_resumes_without_repeating(tmp_path):
    path, text = _read("matmul")
    make, _ = _estimator()
    options = TuneOptions(chip="v5e", backend="fake", budget=12, batch=2)
    with ResultsStore(tmp_path / "r.sqlite") as store:
        first_log: list = []
        with pytest.raises(Interrupted):
            asyncio.run(tune(path, text, options, make(path, text), timer=_timer(first_log, stop_after=4), store=store))
        assert len(first_log) == 4  # two batches of 2 finished and were stored; the third was interrupted
        second_log: list = []
        report = asyncio.run(tune(path, text, options, make(path, text), timer=_timer(second_log), store=store))
        assert not set(first_log) & set(second_log)  # nothing measured twice
        assert report.reused == 4
        assert report.evaluations + report.reused <= 12
        assert report.best_provenance == "device"
        measured = [o for o in report.outcomes if o.measured_s is not None]
        assert report.best == min(measured, key=lambda o: o.measured_s).config
        third_log: list = []
        again = asyncio.run(tune(path, text, options, make(path, text), timer=_timer(third_log), store=store))
        assert third_log == [] and again.best == report.best  # a finished run costs nothing


def test_cpu_timings_never_rank(tmp_path):
    path, text = _read("matmul")
    make, _ = _estimator()

    async def cpu_timer(configs):
        return [Measurement(status="ok", provenance=Provenance.INTERPRET, device_kind="cpu", method="interpret",
                            median_ns=1.0) for _ in configs]

    with ResultsStore(tmp_path / "r.sqlite") as store:
        report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", backend="fake", budget=6), make(path, text),
                                  timer=cpu_timer, store=store))
    assert report.best is None and report.edits == () and all(o.measured_s is None for o in report.outcomes)
    failed = [o for o in report.outcomes if o.verdict.test.why.startswith("not a device timing")]
    assert len(failed) == 6 and all("not a device timing (interpret)" in o.verdict.test.why and o.verdict.timing is None
                                    for o in failed)
    assert report.speedup_vs_current() is None


def test_no_tunables_gives_the_current_configurations_estimate(tmp_path):
    """A file without tunables was refused ("no tunables found"): it gets its estimate, and is told so."""
    path, text = _read("fixed_blocks")
    make, calls = _estimator()
    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e"), make(path, text)))
    assert report.tunables == () and report.current == () and report.best == () and report.edits == ()
    only = report.outcome(())
    assert only is not None and only.verdict.timing == only.estimate and only.estimate_s and only.estimate_s > 0
    assert calls["n"] == 1 and any(n.startswith("nothing to tune: no tunables found") for n in report.notes)


def _config_of(text):
    """The matmul's configuration as the file's text states it (what a tester is given)."""
    import re

    found = re.search(r"bm: int = (\d+), bn: int = (\d+), bk: int = (\d+)", text)
    return tuple(sorted(zip(("bm", "bn", "bk"), map(int, found.groups()))))


def test_without_a_device_the_best_estimate_is_tested_by_the_judge(tmp_path):
    """Tune's own "correct" (the verify op, tier 3 on the file with keyword configurations) is gone: the pick is
    tested by the tester (the run's Judge.test) on the file written with the configuration."""
    from pallasite.analysis.verdict import TestResult

    path, text = _read("matmul")
    make, _ = _estimator()
    asked = []

    async def tester(configured):  # the best-ranked one computes wrong numbers
        asked.append(_config_of(configured))
        if len(asked) == 1:
            return TestResult.wrong("wrong_result: max abs error 3.2 > atol 0.02")
        return TestResult.ok("the judge")

    with ResultsStore(tmp_path / "r.sqlite") as store:
        report = asyncio.run(tune(path, text, TuneOptions(chip="v5e"), make(path, text), tester=tester, store=store))
        ranked = sorted((o for o in report.outcomes if o.estimate_s is not None and o.verdict.compile.ok is not False),
                        key=lambda o: (o.estimate_s, o.config))
        assert asked == [ranked[0].config, ranked[1].config]
        wrong = report.outcome(asked[0]).verdict
        assert wrong.test.outcome == "wrong" and "max abs error 3.2" in wrong.test.why
        assert report.best == asked[1] and report.outcome(asked[1]).verdict.test.outcome == "ok"
        assert report.speedup_vs_current() is not None  # the current configuration was never found wrong
        again = asyncio.run(tune(path, text, TuneOptions(chip="v5e"), make(path, text), tester=tester, store=store))
        assert len(asked) == 2 and again.best == report.best  # test results come back from the store


def test_device_timings_with_the_reference_give_both_speedups(tmp_path):
    from pallasite.analysis.timed import Timed

    path, text = _read("matmul")
    make, _ = _estimator()
    inner = _timer([])

    async def timer(configs):
        ref = Measurement(status="ok", provenance=Provenance.DEVICE, device_kind="TPU v5 lite", method="fake",
                          median_ns=4e5)
        return [Timed.of(m, ref) for m in await inner(configs)]

    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", backend="fake"), make(path, text), timer=timer))
    best = report.outcome(report.best)
    assert report.reference_s == 4e-4
    assert report.speedup_vs_reference() == (pytest.approx(4e-4 / best.measured_s), pytest.approx(
        "the XLA reference on the same device (TPU v5 lite, backend fake)"))
    current = report.outcome(report.current)
    assert report.speedup_vs_current() == (pytest.approx(current.measured_s / best.measured_s), "device")


def test_device_timings_send_the_configured_file_with_the_trusted_one_and_read_the_test(tmp_path):
    """``worker_timer`` sent the file's own text with keyword tunables only (a TUNED_PARAMS or constant tunable was
    never applied) and no trusted file; the judge's timer sends the file written with the configuration, the
    original beside it as the trusted side, and reads the time op's own test."""
    from pallasite.analysis.types import to_json
    from pallasite.engine.workers.client import Reply
    from pallasite.engine.judge import Judge, Trusted
    from pallasite.analysis.timed import Timed
    from pallasite.engine.checker import CheckOptions
    from pallasite.wire import messages

    path, text = _read("reduction")  # its tunables are TUNED_PARAMS entries
    cand = Measurement(status="ok", provenance=Provenance.DEVICE, device_kind="TPU v6 lite", method="xprof",
                       median_ns=1000.0)
    sent = []

    class Backend:
        async def request(self, params, *, purpose, **kw):
            sent.append((params, purpose))
            result = messages.time_result_from_plain({"verdict": "ok", "candidate": to_json(cand),
                                                      "reference": to_json(cand), "judged_by": "the judge",
                                                      "checks": {}, "provenance": "device"})
            return Reply("ok", result=result)

    judge = Judge(None, CheckOptions(target="v6e"), Trusted.of_file(path, text), confined=False)
    timer = config_timer(judge, text, TuneOptions(chip="v6e"), backend=Backend())
    (timed,) = asyncio.run(timer([{"block_rows": 128, "block_cols": 512}]))
    assert isinstance(timed, Timed) and timed.measured == cand and timed.candidate == timing_of(cand)
    assert timed.reference == timing_of(cand) and timed.device_s == 1e-6
    assert timed.test.outcome == "ok" and timed.judged_by.value == "the judge"
    params, purpose = sent[0]
    assert purpose == "device" and isinstance(params, messages.TimeParams) and not params.config
    assert '"block_rows": 128,' in params.source.text and params.source.text != text
    assert params.trusted is not None and params.trusted.text.startswith(text)  # the file as written, trusted


def test_a_gpu_kernel_is_not_estimated_as_a_tpu_one():
    path = os.path.join(DATA, "gpu_kernel.py")
    text = ("import jax\nfrom jax.experimental import pallas as pl\nfrom jax.experimental.pallas import triton as plgpu\n\n"
            "def k(x_ref, o_ref):\n    o_ref[...] = x_ref[...]\n\n"
            "def f(x, *, block: int = 64):\n    return pl.pallas_call(k, grid=(x.shape[0] // block,),\n"
            "        in_specs=[pl.BlockSpec((block,), lambda i: (i,))], out_specs=pl.BlockSpec((block,), lambda i: (i,)),\n"
            "        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
            "        compiler_params=plgpu.CompilerParams(num_warps=4))(x)\n")
    make, calls = _estimator()
    with pytest.raises(TuneError, match="GPU"):
        asyncio.run(tune(path, text, TuneOptions(chip="v5e"), make(path, text)))
    assert calls["n"] == 0

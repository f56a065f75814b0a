"""Tune walks down its ranking until a configuration passes tier 2 (issue 44).

The estimates are the real cost model's, in this process, on tests/data/tune/vmem_edge.py: a bf16 matmul
whose best-estimated blocks fill v5e's 16 MiB scoped VMEM exactly, which the pre-check (blocks x buffers +
scratch) lets through and libtpu refuses (it adds its internal scratch and the dot's temporaries). The
first test compiles with the real compiler through the CLI; the others stand a compiler in that runs out
of VMEM by a stated rule, answering a CompileResult as the checker would, so each rule of the walk is
held on its own: walk on past rejections, skip what is at least as large as an out-of-VMEM one, keep the
current configuration as a candidate, stop at the compile budget."""

from __future__ import annotations

import pytest

import asyncio
import json
import os
import re
import shutil
from pathlib import Path

for _name, _value in {"JAX_PLATFORMS": "cpu", "TPU_WORKER_HOSTNAMES": "localhost", "TPU_SKIP_MDS_QUERY": "1",
                      "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}.items():
    os.environ.setdefault(_name, _value)

from pallasite.analysis.verdict import CompileResult  # noqa: E402
from pallasite.engine.tuning.tune import TuneOptions, tune  # noqa: E402
from pallasite.engine.tuning.tune_walk import larger_values  # noqa: E402

from test_tune import _estimator, _read  # noqa: E402

MIB = 1 << 20
DEFAULTS = "def matmul(x, y, *, bm: int = 256, bn: int = 256, bk: int = 256):"


def _config(text: str) -> tuple:
    m = re.search(r"bm: int = (\d+), bn: int = (\d+), bk: int = (\d+)", text)
    return (("bk", int(m.group(3))), ("bm", int(m.group(1))), ("bn", int(m.group(2))))


def _counted(config: tuple) -> int:
    """Blocks x 2 buffers (bf16) + the f32 accumulator: the pre-check's arithmetic for this kernel."""
    c = dict(config)
    return 2 * 2 * (c["bm"] * c["bk"] + c["bk"] * c["bn"] + c["bm"] * c["bn"]) + 4 * c["bm"] * c["bn"]


def _compiler(log: list, fits=lambda config: _counted(config) <= 12 * MIB, limit: int = 16 * MIB):
    """A stand-in for tier 2 on v5e: out of VMEM (E1001, with the compiler's sizes) unless ``fits``."""
    async def compile_text(text: str) -> CompileResult:
        config = _config(text)
        log.append(config)
        if fits(config):
            return CompileResult.passed("v5e")
        needed = _counted(config) + 3 * MIB
        return CompileResult.failed(
            "1 error(s): PLS201", f"line 23: PLS201: VMEM out of memory (E1001: CompileTimeScopedVmemOom: ... Scoped "
            f"allocation with size {needed / MIB:.2f}M and limit {limit / MIB:.2f}M exceeded scoped vmem limit)",
            chip="v5e", tiers=(0, 1, 2))
    return compile_text


@pytest.mark.pipeline
def test_tune_walks_past_the_top_ranked_configurations_the_compiler_rejects(tmp_path, capsys):
    """The real compiler for v5e refuses the 3 best-estimated configurations (out of VMEM); tune stopped
    there with "nothing to apply". It walks on to the 4th, which compiles, and says why the 3 were refused."""
    from pallasite.server.cli import main

    path = tmp_path / "vmem_edge.py"
    shutil.copy(Path(__file__).parent / "data" / "tune" / "vmem_edge.py", path)
    assert main(["tune", str(path), "--target", "v5e", "--verify", "0", "--no-store", "--format", "json"]) == 0
    out = capsys.readouterr().out
    report = json.loads(out[: out.index("\n}\n") + 2])
    steps = report["walk"]["steps"]
    rejected = [s for s in steps if s["state"] == "rejected"]
    assert len(rejected) >= 3 and all(s["out_of_vmem"] for s in rejected)
    assert all(s["needed"] > s["counted"] == 16 * MIB for s in rejected)  # the pre-check counted exactly the limit
    assert steps[-1]["state"] == "passed" and report["best"] == steps[-1]["config"]
    assert report["best_compile"]["ok"] is True and report["best_verdict"] is not None
    estimated = {tuple(map(tuple, o["config"])): o["estimate"]["seconds"] for o in report["outcomes"] if o["estimate"]}
    assert all(o["verdict"]["status"] in ("compiled, not verified", "not compiled", "not checked") for o in report["outcomes"])
    best = estimated[tuple(map(tuple, report["best"]))]
    assert all(estimated[tuple(map(tuple, s["config"]))] <= best for s in rejected)  # they ranked above it


def _limited(estimate, limit: int = 16 * MIB):
    """The in-process estimator with v5e's scoped-VMEM limit as the chip probe measures it (16 MiB)."""
    from dataclasses import replace

    async def with_limit(configs, kinds):
        reply = await estimate(configs, kinds)
        return replace(reply, spec=replace(reply.spec, scoped_vmem_limit_bytes=limit))
    return with_limit


def test_configurations_at_least_as_large_as_an_out_of_vmem_one_are_skipped_without_compiling():
    """bk=1024 and bk=2048 with bm=256, bn=512 tie in the estimate: the smaller is tried first; when it runs out
    of VMEM (the stand-in's rule: bk >= 1024 does), the larger is skipped, not compiled."""
    path, text = _read("vmem_edge")
    make, _ = _estimator()
    log: list = []
    declared = {"bm": [256], "bn": [256, 512], "bk": [256, 512, 1024, 2048]}
    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0, declared=declared),
                              _limited(make(path, text)), compiler=_compiler(log, fits=lambda c: dict(c)["bk"] <= 512)))
    walk = report.walk
    skipped = [s for s in walk.steps if s.state == "skipped"]
    rejected = [s.config for s in walk.steps if s.state == "rejected"]
    assert skipped and rejected
    for s in skipped:  # each at least as large as a configuration that ran out of VMEM, and never compiled
        assert s.like in rejected and larger_values(s.config, s.like) and s.config not in log
        assert report.outcome(s.config).verdict.status() == "not compiled"
        assert report.outcome(s.config).verdict.text().startswith("not compiled: skipped without compiling: at least "
                                                                   "as large as")
    assert report.best is not None and dict(report.best)["bk"] <= 512 and report.best_compile.ok is True
    assert walk.steps[-1].state == "passed" and walk.steps[-1].config == report.best
    from pallasite.server.commands.cmd_tune import format_report

    text_out = format_report(report, top=3)
    assert "skipped without compiling" in text_out and "the compiler needed" in text_out


def test_the_current_configuration_is_kept_when_nothing_walked_passes():
    path, text = _read("vmem_edge")
    make, _ = _estimator()
    log: list = []
    current = _config(DEFAULTS)
    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0, compiles=3), make(path, text),
                              compiler=_compiler(log, fits=lambda c: c == current)))
    assert report.best == current and report.edits == () and report.best_compile.ok is True
    assert report.walk.compiled == 3 and "compile budget (3)" in report.walk.stopped
    assert len(set(log)) == 4  # the current configuration and 3 of the ranking: the budget holds
    assert any("the current configuration compiles" in n for n in report.notes)


def test_a_current_configuration_the_pre_check_rejects_is_still_compiled_and_ranked_if_it_compiles():
    path, text = _read("vmem_edge")
    big = text.replace(DEFAULTS, "def matmul(x, y, *, bm: int = 1024, bn: int = 1024, bk: int = 2048):")
    make, _ = _estimator()
    log: list = []
    report = asyncio.run(tune(path, big, TuneOptions(chip="v5e", verify=0), _limited(make(path, big)),
                              compiler=_compiler(log, fits=lambda c: True)))
    current = _config(big)
    assert _counted(current) > 16 * MIB and current in log  # rejected by the pre-check, compiled all the same
    assert report.current_compile.ok is True and report.outcome(current).verdict.compile.ok is True
    assert report.outcome(current).verdict.timing is not None  # ranked with the others
    assert any("the pre-check rejected the current configuration" in n for n in report.notes)


def test_nothing_passes_tier_2_says_why_and_applies_nothing(tmp_path):
    path, text = _read("vmem_edge")
    make, _ = _estimator()
    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0, compiles=4), make(path, text),
                              compiler=_compiler([], fits=lambda c: False)))
    assert report.best is None and report.edits == () and report.best_provenance is None
    assert report.current_compile.ok is False
    assert any(n.startswith("no configuration passed tier 2 for v5e") and "PLS201" in n for n in report.notes)


def test_the_audit_compiles_what_the_pre_check_rejected_and_says_when_the_compiler_disagrees():
    """The pre-check (16 MiB on v5e) rejects bm=bn=1024, bk=2048 (24 MiB counted); a compiler with more room (the
    stand-in fits up to 32 MiB) accepts it: the audit compiles it and says the two disagree."""
    path, text = _read("vmem_edge")
    make, _ = _estimator()
    log: list = []
    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0, audit=2), _limited(make(path, text)),
                              compiler=_compiler(log, fits=lambda c: _counted(c) <= 32 * MIB)))
    too_big = (("bk", 2048), ("bm", 1024), ("bn", 1024))
    audited = report.outcome(too_big).verdict  # ranked nowhere (the pre-check), compiled by the audit
    assert audited.timing is None and audited.compile.ok is True and "rejected before compiling" in audited.test.why
    assert too_big in log
    assert [(c, r.ok) for c, _, r in report.audited] == [(too_big, True)]
    assert any("the pre-check rejected for VMEM 1 of 1" in n for n in report.notes)


@pytest.mark.pipeline
def test_the_walks_pick_keeps_the_files_values_of_tunables_that_never_change_the_program():
    """JAXBench-style: six backward-pass sizes the forward entry never reads. The best-estimated is put back to the
    file's values by the exploration; the walk's pick further down the ranking (the stand-in compiler refuses output
    blocks larger than 128 x 128, so the walk skips and compiles past 16 configurations) had random values for them, which --apply wrote into the file (1p_Flash_Attention v5e:
    MIN_BLOCK_SIZE=256, NUM_SUBLANES=16, block_k_dkv=32, ...). Now each configuration the walk may reach is
    estimated again with those values put back, and replaced when the program is the same."""
    path, text = _read("wide_space")
    make, _ = _estimator()

    def blocks(text):
        m = re.search(r'"block_shape": \[(\d+), (\d+)\]', text)
        return int(m.group(1)) * int(m.group(2))

    async def compile_text(text):
        if blocks(text) <= 128 * 128:
            return CompileResult.passed("v5e")
        return CompileResult.failed("1 error(s): PLS201", "line 9: PLS201: VMEM out of memory (E1001)", chip="v5e")

    report = asyncio.run(tune(path, text, TuneOptions(chip="v5e", verify=0, estimates=150), make(path, text),
                              compiler=compile_text))
    unused = {n for n in dict(report.current) if n.endswith(("dkv", "dq"))}
    assert report.walk.count("rejected") >= 1 and report.best is not None  # the pick is not the best-estimated
    assert {n: v for n, v in report.best if n in unused} == {n: 128 for n in unused}

"""Severities that mean something, and quiet success (server/reports/report_format.py, server/commands/cmd_check.py):
"could not check" is a warning that says what to do, `--strict` fails on a file not fully checked,
a clean file prints nothing, and the per-file line says which tiers ran."""

from __future__ import annotations

import pytest

import asyncio
import os
import re

from pallasite.analysis.codes import CODES
from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.workers.backend import Reply
from pallasite.wire.messages import Progress, Stage
from pallasite.server.reports import report_format
from pallasite.server.cli import main

DATA = os.path.join(os.path.dirname(__file__), "data")
LARGE = os.path.join(DATA, "compiler", "limits", "slow_compile.py")  # correct; compiles for minutes
CLEAN = os.path.join(DATA, "tier0", "pls005_kernel_params_ok.py")
NO_TASK = os.path.join(DATA, "zero_config", "no_kernel_call_script.py")  # no task, no static shapes


class TimedOutClient:
    """The worker as it answers a tier-2 compile that ran past the limit (progress, then timed out)."""

    async def request(self, params, *, purpose="check", timeout_s=None, on_progress=None):
        for report in (Progress(Stage.IMPORT, "importing slow_compile.py"),
                       Progress(Stage.TIER, "tier 1: mm (Pallas TPU lowering for v6e)", tier=1, entry="mm"),
                       Progress(Stage.TIER, "tier 2: mm (libtpu compile for v6e)", tier=2, entry="mm")):
            on_progress(report)
        return Reply(status="timed_out", message=f"no result after {timeout_s:g} s", limit_s=timeout_s)


def _timed_out_report():
    checker = Checker(CheckOptions(target="v6e", tiers=(0, 1, 2), time_limit_s=45.0), client=TimedOutClient())
    return asyncio.run(checker.check(LARGE))


def test_a_tier2_time_out_on_a_correct_large_kernel_is_a_warning_naming_the_kernel_and_the_limit():
    report = _timed_out_report()
    [finding] = [f for f in report.findings if f.severity in ("error", "warning")]
    assert (finding.code, finding.severity) == ("PLS205", "warning")
    assert "mm_kernel" in finding.message and "45 s time limit" in finding.message
    assert "--time-limit" in finding.message  # says what to do


def test_strict_makes_not_fully_checked_fail():
    report = _timed_out_report()
    assert report_format.exit_status([report], (0, 1, 2)) == 0
    assert report_format.exit_status([report], (0, 1, 2), strict=True) == 1
    assert any("PLS205" in why for why in report_format.not_checked(report, (0, 1, 2)))


def test_could_not_check_codes_are_warnings_or_notes_never_errors():
    for code in sorted(report_format.COULD_NOT_CHECK):
        assert CODES[code].severity in ("warning", "information"), code


def test_a_clean_file_prints_only_the_summary_line(capsys):
    assert main(["check", "--no-cache", CLEAN, "--tiers", "0"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and re.match(r"1 file\(s\) checked for v6e, tiers 0 in \d+\.\d s: 0 error\(s\)", out[0]), out
    assert main(["check", "--no-cache", CLEAN, "--tiers", "0", "--verbose"]) == 0
    assert f"{CLEAN}: tier 0 ran" in capsys.readouterr().out


@pytest.mark.pipeline
def test_a_file_not_fully_checked_says_which_tiers_ran_and_strict_fails_it(capsys):
    assert main(["check", "--no-cache", NO_TASK, "--tiers", "0,1"]) == 0
    out = capsys.readouterr().out
    assert f"{NO_TASK}: tier 0 ran; not fully checked: tier 1 skipped: no example inputs (PLS900)" in out, out
    assert "1 file(s) not fully checked" in out.splitlines()[-1]
    assert "information[PLS900]" not in out  # information findings and notes move to --verbose
    assert main(["check", "--no-cache", NO_TASK, "--tiers", "0,1", "--strict"]) == 1
    capsys.readouterr()
    assert main(["check", "--no-cache", NO_TASK, "--tiers", "0,1", "--verbose"]) == 0
    assert "information[PLS900]" in capsys.readouterr().out


def test_pls202_names_the_shapes_of_the_cast():
    from pallasite.engine.findings.figures import shape_cast_sentence

    rec = {"message": "INTERNAL: Mosaic failed to compile TPU kernel: infer-vector-layout: unsupported shape cast",
           "detail": 'The MLIR operation involved:\n  %4 = "tpu.reshape"(%3) : (vector<8x128xf32>) -> vector<32x32xf32>'}
    said = shape_cast_sentence("infer-vector-layout: unsupported shape cast", rec)
    assert said.startswith("infer-vector-layout: unsupported shape cast from f32[8,128] to f32[32,32]")
    assert shape_cast_sentence("unsupported shape cast", {"message": "no operation quoted"}) == "unsupported shape cast"


def test_a_file_whose_tiers_all_gave_no_verdict_does_not_say_none_ran(capsys):
    """JAXBench 7p's interpret run took 45 s and gave no verdict (its reference was stopped for memory): the line
    said "no tier ran". The tiers listed are those that gave a verdict, and the line says so."""
    assert main(["check", "--no-cache", NO_TASK, "--tiers", "1"]) == 0
    out = capsys.readouterr().out
    assert f"{NO_TASK}: no tier gave a verdict; not fully checked: tier 1 skipped" in out, out

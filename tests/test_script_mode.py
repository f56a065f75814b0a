"""Script mode: `pallasite check --script` runs each file's __main__ and checks every pallas_call.

The scripts in tests/data/scripts/ are written in the common style (kernel + main() that runs it
with interpret=True and compares with numpy). Half hide a TPU error that interpret mode does not
see; each must be found by the compiler tiers and located, the clean ones must stay clean.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

DATA = Path(__file__).parent / "data" / "scripts"
EXPECTED = {k: v for k, v in json.loads((DATA / "expected.json").read_text()).items() if not k.startswith("_")}
HAVE_LIBTPU = importlib.util.find_spec("libtpu") is not None
TIERS = (1, 2) if HAVE_LIBTPU else (1,)


@pytest.fixture(scope="module")
def reports():
    paths = [str(DATA / name) for name in EXPECTED]
    out = check_paths(paths, CheckOptions(target="v5e", tiers=TIERS, script=True, time_limit_s=120))
    return {Path(r.path).name: r for r in out}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_script_findings(reports, name):
    want = [w for w in EXPECTED[name]["findings"] if w["tier"] in TIERS + (3,)]  # 3: the script's own run
    if len(want) < len(EXPECTED[name]["findings"]):
        pytest.skip("needs libtpu (tier 2)")
    got = [f for f in reports[name].findings if f.tier in TIERS + (3,) and f.code != "PLS906"]
    assert [(f.code, f.span.line + 1) for f in got] == [(w["code"], w["line"]) for w in want], [f.message for f in got]
    for finding, expected in zip(got, want):
        assert expected["says"] in finding.message


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_call_is_recorded_and_deduplicated(reports, name):
    note = next(n for n in reports[name].notes if n.startswith("script mode:"))
    want = EXPECTED[name]
    assert f"{want['calls']} pallas_call(s) ran, {want['distinct']} distinct checked for v5e" in note


def test_hidden_errors_are_invisible_to_the_scripts_own_interpret_run(reports):
    """The hidden-error scripts pass their own numpy check: only the compiler tiers catch them."""
    for name in ("small_block_hidden.py", "cumsum_hidden.py", "reshape_hidden.py"):
        assert not any(f.code == "PLS901" for f in reports[name].findings), name


def test_verdicts_name_the_kernels(reports):
    states = {k.name: dict(k.tiers)[1] for k in reports["small_block_hidden.py"].kernels}
    assert states == {"scale_kernel": "error"}
    assert {dict(k.tiers)[1] for k in reports["softmax_clean.py"].kernels} == {"ok"}


def test_run_main_restores_the_interpreter_state():
    from pallasite.runner.script_mode import dedupe, run_main

    main_before, argv_before, path_before = sys.modules["__main__"], list(sys.argv), list(sys.path)
    calls, error = run_main(str(DATA / "add_clean.py"))
    assert error is None
    assert [c.operands[0].shape for c in calls] == [(32, 128), (16, 128), (32, 128)]
    assert len(dedupe(calls)) == 2
    assert all(c.line == 15 and c.function == "add" for c in calls)
    assert sys.modules["__main__"] is main_before and sys.argv == argv_before and sys.path == path_before


def test_the_scripts_own_exception_comes_from_the_script_run(reports):
    """Not a tier-1 import failure: the script's run raised, and its calls were checked anyway."""
    from pallasite.analysis.codes import CODES

    finding = next(f for f in reports["raises_itself.py"].findings if f.code == "PLS901")
    assert (finding.tier, finding.origin) == (3, "script run")
    assert "was still checked" in finding.message
    assert {dict(k.tiers)[1] for k in reports["raises_itself.py"].kernels} == {"ok"}
    assert "script mode" in CODES["PLS901"].hint and "still checked" in CODES["PLS901"].hint


def test_a_script_that_hangs_after_its_kernel_is_stopped_and_its_call_checked():
    """`while True` after the call: stopped at the script's share of an 8 s limit, at the loop's line;
    the recorded call is checked (its hidden tiling error found), not lost to a PLS903 at the call."""
    report = check_paths([str(DATA / "hangs_after_call.py")],
                         CheckOptions(target="v5e", tiers=(1,), script=True, time_limit_s=8))[0]
    found = {f.code: f for f in report.findings}
    assert set(found) == {"PLS101", "PLS903"}, [f.message for f in report.findings]
    assert found["PLS101"].span.line + 1 == 18
    hang = found["PLS903"]
    assert hang.span.line + 1 in (27, 28), hang.message  # the `while True` loop
    assert (hang.tier, hang.origin) == (3, "script run")
    assert "the script was still running at line" in hang.message and "its share of the 8 s time limit" in hang.message
    assert "the pallas_call it made was still checked" in hang.message
    assert {dict(k.tiers)[1] for k in report.kernels} == {"error"}


def test_script_budget_keeps_time_to_check_the_calls():
    from pallasite.runner.script_mode import script_budget

    assert script_budget(None, 0.0) is None
    assert script_budget(8, 1.0) == pytest.approx(4.0)  # 7 s left, 3 s kept
    assert script_budget(120, 0.0) == pytest.approx(72.0)  # 40 % kept
    assert script_budget(2, 1.5) == 0.5


def test_run_main_stops_a_script_at_its_time_limit(tmp_path):
    from pallasite.runner.script_mode import ScriptTimeLimit, run_main

    script = tmp_path / "sleeper.py"
    script.write_text("import time\n\nwhile True:\n    time.sleep(0.05)\n")
    calls, error = run_main(str(script), time_limit_s=0.5)
    assert calls == [] and isinstance(error, ScriptTimeLimit)
    import signal

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_syntax_error_is_reported_in_script_mode(tmp_path):
    """--script on a file Python cannot parse (no Pallas in it): PLS000 at the error, not a clean report."""
    script = tmp_path / "broken.py"
    script.write_text("import numpy as np\n\n\ndef main(:\n    print(np.ones(3))\n")
    report = check_paths([str(script)], CheckOptions(target="v5e", tiers=(1,), script=True, time_limit_s=30))[0]
    assert [(f.code, f.span.line + 1, f.severity) for f in report.findings] == [("PLS000", 4, "error")]

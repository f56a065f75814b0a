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

from pallasite.runner.checker import CheckOptions, check_paths

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
    want = [w for w in EXPECTED[name]["findings"] if w["tier"] in TIERS]
    if len(want) < len(EXPECTED[name]["findings"]):
        pytest.skip("needs libtpu (tier 2)")
    got = [f for f in reports[name].findings if f.tier in TIERS and f.code != "PLS906"]
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

"""The compiler tiers end to end: the corpus of tests/data/compiler through one warm worker.

Each broken file, checked with tiers 0-2, must give the expected code at the expected line
(tests/data/compiler/expected.json, written before locating was implemented); each is checked
again with its catching tier alone, so a tier-0 hit cannot hide a wrong tier-1/2 location; each
fixed twin must give no error. Cases caught only by the real TPU compiler need libtpu
(``tpu_compiler``) and are skipped cleanly without it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re

import pytest

from pallasite.engine.checker import Checker, CheckOptions

CORPUS = os.path.join(os.path.dirname(__file__), "data", "compiler")
EXPECTED = json.load(open(os.path.join(CORPUS, "expected.json")))
CASES = EXPECTED["cases"]
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
needs_libtpu = pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed (pip install 'pallasite[tpu]')")


def _param(name: str):
    marks = [pytest.mark.tpu_compiler, needs_libtpu] if CASES[name]["tier"] == 2 else []
    return pytest.param(name, marks=marks, id=name)


PARAMS = [_param(n) for n in sorted(CASES)]


@pytest.fixture(scope="module")
def check():
    """check(path, tiers) -> FileReport, through one warm worker shared by the whole module."""
    loop = asyncio.new_event_loop()
    checker = Checker(CheckOptions(target=EXPECTED["target"], time_limit_s=180.0))

    def run(path: str, tiers: tuple[int, ...]):
        return loop.run_until_complete(checker.check(path, tiers=tiers))

    yield run
    loop.run_until_complete(checker.close())
    loop.close()


def _compiler_errors(report):
    """(code, line) of each compiler error, shown alone or folded into the tier-0 finding it agrees with."""
    errors = [(f.code, f.span.line + 1) for f in report.findings if f.severity == "error" and f.tier >= 1]
    for f in report.findings:
        for rel in f.related if f.severity == "error" else ():
            m = re.search(r" agrees with (PLS\d+)(?: \(as (PLS\d+)\))?:", rel.message)
            if m:  # engine/findings/agreement.py: one mistake, one finding ("as": the compiler's own code)
                errors.append((m.group(2) or m.group(1), rel.span.line + 1))
    return errors


@pytest.mark.parametrize("name", PARAMS)
def test_broken_file_all_tiers_gives_expected_code_at_expected_line(check, name):
    case = CASES[name]
    report = check(os.path.join(CORPUS, f"{name}_broken.py"), (0, 1, 2))
    assert _compiler_errors(report) == [(case["code"], case["line"])], [f.message for f in report.findings]
    finding = next((f for f in report.findings if f.code == case["code"]), None)
    if finding is None:  # folded into the tier-0 finding of the same mistake, saying who agreed
        agreed = [r.message for f in report.findings for r in f.related]
        code = case["code"]
        said = [m for m in agreed if f"({EXPECTED['target']}) agrees with " in m]
        assert any(f"(as {code})" in m or f"agrees with {code}:" in m for m in said), agreed
        return
    assert finding.tier == case["tier"]
    assert finding.chip == EXPECTED["target"]


@pytest.mark.parametrize("name", PARAMS)
def test_broken_file_catching_tier_alone(check, name):
    case = CASES[name]
    report = check(os.path.join(CORPUS, f"{name}_broken.py"), (case["tier"],))
    assert not [f for f in report.findings if f.tier == 0 and f.code not in ("PLS900",)]  # tier 0 not run
    assert _compiler_errors(report) == [(case["code"], case["line"])], [f.message for f in report.findings]
    if report.kernels and not case["code"].startswith("PLS9"):
        assert any(dict(k.tiers).get(case["tier"]) == "error" for k in report.kernels)


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in sorted(CASES)])
def test_fixed_file_has_no_error(check, name):
    report = check(os.path.join(CORPUS, f"{name}_fixed.py"), (0, 1, 2))
    errors = [(f.code, f.span.line + 1, f.message) for f in report.findings if f.severity == "error"]
    assert errors == []
    assert report.kernels, "the fixed kernel should have a verdict"
    for verdict in report.kernels:
        tiers = dict(verdict.tiers)
        assert tiers[0] == "ok" and tiers[1] == "ok"
        if HAS_LIBTPU:
            assert tiers[2] == "ok"
        else:
            assert tiers[2].startswith("skipped")


def test_tier2_unavailable_is_said_once_as_a_note(check):
    if HAS_LIBTPU:
        pytest.skip("libtpu is installed: tier 2 is available")
    report = check(os.path.join(CORPUS, "tiling_lanes_fixed.py"), (0, 1, 2))
    notes = [n for n in report.notes if n.startswith("tier 2 skipped")]
    assert len(notes) == 1 and "pip install \"jax[tpu]==" in notes[0]


TIER2_CASES = sorted(n for n, c in CASES.items() if c["tier"] == 2)


@pytest.fixture(scope="module")
def shared_client():
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig

    loop = asyncio.new_event_loop()
    client = WorkerClient(WorkerConfig(timeout_s=180.0))
    yield loop, client
    loop.run_until_complete(client.close())
    loop.close()


@pytest.mark.slow
@pytest.mark.tpu_compiler
@needs_libtpu
@pytest.mark.parametrize("target", ["v4", "v5p", "v6e"])
@pytest.mark.parametrize("name", TIER2_CASES)
def test_compiler_only_cases_are_located_the_same_on_other_chips(shared_client, name, target):
    loop, client = shared_client
    checker = Checker(CheckOptions(target=target, tiers=(2,), time_limit_s=180.0), client=client)
    report = loop.run_until_complete(checker.check(os.path.join(CORPUS, f"{name}_broken.py")))
    case = CASES[name]
    assert _compiler_errors(report) == [(case["code"], case["line"])], [f.message for f in report.findings]
    assert {f.chip for f in report.findings if f.severity == "error"} == {target}


def test_a_value_the_wrapper_computes_eagerly_while_traced_lowers_and_compiles(check):
    report = check(os.path.join(CORPUS, "compile_time_eval_clean.py"), (0, 1, 2))
    assert [(f.code, f.message) for f in report.findings if f.severity == "error"] == []
    (verdict,) = report.kernels
    assert dict(verdict.tiers)[1] == "ok"
    assert dict(verdict.tiers)[2] == ("ok" if HAS_LIBTPU else dict(verdict.tiers)[2])


def test_tier_3_still_runs_a_kernel_only_the_tpu_lowering_rejects(check):
    report = check(os.path.join(CORPUS, "mosaic_rejects_wrong_too.py"), (0, 1, 2, 3))
    found = {(f.code, f.tier, f.span.line + 1) for f in report.findings if f.severity == "error"}
    assert ("PLS103", 1, 11) in found and any(code == "PLS304" and tier == 3 for code, tier, _ in found), found
    (verdict,) = report.kernels
    assert dict(verdict.tiers)[3] == "error"


def test_only_the_lowering_s_own_rejections_let_tier_3_run():
    from pallasite.wire.messages import ErrorRecord, lowering_only

    unlowered = {"tier": 1, "type": "NotImplementedError", "message": "Unimplemented primitive in Pallas TPU lowering"}
    verified = ErrorRecord(stage="tier 1", type="VerificationError", sentence="", message="'vector.extract_strided_"
                           "slice' op expected strides to be confined to [1, 2)")
    traced = {"tier": 1, "type": "TypeError", "message": "add got incompatible shapes for broadcasting"}
    assert lowering_only([unlowered], 1) and lowering_only([verified], 1)
    assert not lowering_only([unlowered, traced], 1) and not lowering_only([], 1) and not lowering_only([unlowered], 2)

"""`--severity CODE=LEVEL` holds for the finding the user sees when a compiler tier agrees with the
tier-0 rule: the folded finding is that code's, so it has the user's level (it printed error[PLS001])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from pallasite.analysis.types import Finding, Span
from pallasite.engine.findings.agreement import merge_agreeing

ROOT = Path(__file__).resolve().parent.parent


def _pair(level: str) -> list[Finding]:
    tier0 = Finding("PLS001", "block dim 200", Span(10, 13, 10, 16), tier=0, severity=level)
    compiler = Finding("PLS101", "The lowering requires (8, 128).", Span(10, 4, 10, 30), tier=1,
                       origin="jax lowering", chip="v6e")
    return [tier0, compiler]


def test_an_overridden_code_keeps_the_users_level_when_the_compiler_agrees():
    [merged] = merge_agreeing(_pair("warning"), severity={"PLS001": "warning"})
    assert merged.severity == "warning" and "agrees with PLS001 (as PLS101)" in merged.related[-1].message


def test_without_an_override_the_compilers_error_still_raises_a_tier0_warning():
    [merged] = merge_agreeing(_pair("warning"))
    assert merged.severity == "error"
    [merged] = merge_agreeing(_pair("warning"), severity={"PLS004": "warning"})  # another code's override
    assert merged.severity == "error"


def test_check_severity_warning_prints_a_warning_when_the_lowering_agrees(tmp_path):
    shutil.copy(ROOT / "examples" / "bad_tiling.py", tmp_path / "bad_tiling.py")
    (tmp_path / ".pallasite").mkdir()
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", "bad_tiling.py", "--tiers", "0,1",
                           "--severity", "PLS001=warning"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "jax lowering (v6e) agrees with PLS001 (as PLS101)" in done.stdout, done.stdout + done.stderr  # the compiler ran, agreed
    assert "warning[PLS001]" in done.stdout and "error[PLS001]" not in done.stdout, done.stdout
    assert done.returncode == 0, done.stdout


def test_the_editor_keeps_the_override_when_the_compiler_agrees():
    """The language server folds tier 0 and the compiler's findings again per snapshot (documents.py):
    with the workspace's `severity` setting the folded finding keeps the user's level there too."""
    from types import SimpleNamespace

    from pallasite.server.documents import DocumentSnapshot

    tier0, compiler = _pair("warning")
    snap = DocumentSnapshot(uri="file:///k.py", path="/k.py", version=1, text="x\n" * 20, tier0=(tier0,),
                            compiler=(compiler,))
    assert [f.severity for f in snap.findings({"PLS001": "warning"})] == ["warning"]
    assert [f.severity for f in snap.findings()] == ["error"]  # no override: the compiler's error stands
    with_settings = DocumentSnapshot(uri="file:///k.py", path="/k.py", version=1, text="x\n" * 20, tier0=(tier0,),
                                     compiler=(compiler,), settings=SimpleNamespace(severity={"PLS001": "warning"}))
    assert [f.severity for f in with_settings.findings()] == ["warning"]


# --------------------------------------------------------------------------- which finding the agreement is under


def _lowering(code: str, message: str, line: int) -> Finding:
    return Finding(code, message, Span(line, 4, line, 30), tier=1, origin="jax lowering", chip="v6e")


def test_the_agreement_line_cites_the_finding_it_is_under():
    """Under PLS005 the line said "agrees (PLS110)", which reads as another finding: it names PLS005
    and gives the lowering's own code after "as" (failed before: "jax lowering (v6e) agrees (PLS110): ...")."""
    params = Finding("PLS005", "Kernel k() takes 3 ref parameter(s)", Span(10, 0, 10, 20), tier=0)
    [merged] = merge_agreeing([params, _lowering("PLS110", "k() missing 1 required positional argument: 'o_ref'", 10)])
    assert merged.related[-1].message == ("jax lowering (v6e) agrees with PLS005 (as PLS110): "
                                          "k() missing 1 required positional argument: 'o_ref'")


def test_a_compiler_error_goes_under_the_tier0_finding_of_its_own_mistake():
    """PLS110 covers a kernel's parameter count (PLS005) and a returned value (PLS009): a lowering error
    saying "should return None" two lines below a PLS005 went under PLS005, the first finding within
    reach (failed before); it goes under PLS009, and one saying "missing ... argument" never joins PLS009."""
    params = Finding("PLS005", "Kernel k() takes 3 ref parameter(s)", Span(10, 0, 10, 20), tier=0)
    returns = Finding("PLS009", "Kernel k() returns a value", Span(12, 4, 12, 30), tier=0)
    late = _lowering("PLS110", "The kernel function in the pallas_call k at f.py:11 should return None.", 12)
    merged = merge_agreeing([params, returns, late])
    assert [(f.code, [r.message.split(":")[0] for r in f.related]) for f in merged] == [
        ("PLS005", []), ("PLS009", ["jax lowering (v6e) agrees with PLS009 (as PLS110)"])]
    missing = _lowering("PLS110", "k() missing 1 required positional argument: 'o_ref'", 12)
    assert [f.code for f in merge_agreeing([returns, missing])] == ["PLS009", "PLS110"]


def test_of_two_findings_of_the_same_code_the_nearest_takes_the_compiler_error():
    """Two PLS004s two lines apart (two calls the analysis could not tell apart): the lowering's PLS105 at
    the second goes under the second, not the first one in reach (failed before)."""
    first = Finding("PLS004", "dimension_semantics has 2 entries", Span(20, 30, 20, 50), tier=0)
    second = Finding("PLS004", "dimension_semantics has 3 entries", Span(22, 30, 22, 50), tier=0)
    merged = merge_agreeing([first, second, _lowering("PLS105", "Length of grid does not match.", 22)])
    assert [len(f.related) for f in merged] == [0, 1]

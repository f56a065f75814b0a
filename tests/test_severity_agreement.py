"""`--severity CODE=LEVEL` holds for the finding the user sees when a compiler tier agrees with the
tier-0 rule: the folded finding is that code's, so it has the user's level (it printed error[PLS001])."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from pallasite.analysis.types import Finding, Span
from pallasite.engine.agreement import merge_agreeing

ROOT = Path(__file__).resolve().parent.parent


def _pair(level: str) -> list[Finding]:
    tier0 = Finding("PLS001", "block dim 200", Span(10, 13, 10, 16), tier=0, severity=level)
    compiler = Finding("PLS101", "The lowering requires (8, 128).", Span(10, 4, 10, 30), tier=1,
                       origin="jax lowering", chip="v6e")
    return [tier0, compiler]


def test_an_overridden_code_keeps_the_users_level_when_the_compiler_agrees():
    [merged] = merge_agreeing(_pair("warning"), severity={"PLS001": "warning"})
    assert merged.severity == "warning" and "agrees (PLS101)" in merged.related[-1].message


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
    assert "jax lowering (v6e) agrees (PLS101)" in done.stdout, done.stdout + done.stderr  # the compiler ran, agreed
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

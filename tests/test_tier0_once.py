"""One tier-0 analysis per document version: the checker takes the language server's snapshot
analysis of the text it checks instead of reading the text again (engine/checker.py,
server/tier0_runs.analysis_for_check)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from types import SimpleNamespace

import pytest

from pallasite.analysis import tier0
from pallasite.analysis.types import Span
from pallasite.engine import checker as checker_mod
from pallasite.engine.checker import Checker, CheckOptions
from pallasite.server import tier0_runs
from pallasite.server.documents import Document
from pallasite.server.settings import Settings
from pallasite.server.shifting import Edit

DATA = os.path.join(os.path.dirname(__file__), "data")
TILING = os.path.join(DATA, "tier0", "pls001_tiling_bad.py")


def _text() -> str:
    with open(TILING, encoding="utf-8") as handle:
        return handle.read()


def test_the_checker_takes_the_analysis_it_is_given(monkeypatch):
    text = _text()
    options = CheckOptions(target="v5e", tiers=(0,))
    own = asyncio.run(Checker(options).check(TILING, text))
    given = tier0.analyze(text, TILING, target="v5e", scoped_vmem=checker_mod.scoped_vmem("v5e"))

    def refuse(*args, **kwargs):
        raise AssertionError("the checker analysed the text again")

    monkeypatch.setattr(checker_mod, "analyze", refuse)
    taken = asyncio.run(Checker(options).check(TILING, text, analysis=given))
    assert [f.code for f in own.findings] == ["PLS001"]
    assert taken.findings == own.findings and taken.kernels == own.kernels
    with pytest.raises(AssertionError, match="analysed the text again"):  # without one it analyses (the refusal fires)
        asyncio.run(Checker(options).check(TILING, text))


def _session(target: str, folder_target: str | None = None) -> SimpleNamespace:
    settings = Settings(target=target)
    folder = dataclasses.replace(settings, target=folder_target or target)
    return SimpleNamespace(settings=settings, settings_for=lambda path: folder)


def _analysed(text: str, target: str) -> Document:
    doc = Document.opened("file:///k.py", TILING, 1, text)
    result = tier0_runs.tier0_snapshot(text, TILING, target, {})
    doc.snapshot = doc.snapshot.with_tier0(1, *result)
    return doc


def test_a_check_gets_the_snapshot_analysis_of_its_own_text_only():
    text = _text()
    doc = _analysed(text, "v5e")
    assert tier0_runs.analysis_for_check(_session("v5e"), doc) is doc.snapshot.analysis
    assert tier0_runs.analysis_for_check(_session("v5e", folder_target="v6e"), doc) is None  # the folder checks v6e
    doc.apply(2, [Edit(Span(0, 0, 0, 0), "# edited\n")])  # not analysed yet at version 2
    assert tier0_runs.analysis_for_check(_session("v5e"), doc) is None
    surrogate = _analysed(text + "\n# \ud800\n", "v5e")  # tier 0 read a repaired copy of this text
    assert tier0_runs.analysis_for_check(_session("v5e"), surrogate) is None

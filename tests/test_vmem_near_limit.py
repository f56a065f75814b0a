"""A VMEM overflow a few percent over the limit says so: which libtpu decided, that other compiler
versions may differ, and the ``vmem_limit_bytes`` that fits, verified by tier 2, offered as a fix
(tests/data/vmem/near_limit.py: 32.06 MiB against v6e's 32 MiB scoped default). Needs libtpu."""

from __future__ import annotations

import asyncio
import importlib.util
import os

import pytest

from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.findings.classify import near_limit_sentence
from pallasite.runner.vmem_fit import near_limit, proposals

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "vmem", "near_limit.py")
needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="libtpu is not installed")


def test_only_a_near_overflow_gets_a_proposal_and_a_failed_one_says_why():
    calls = []

    def fits_at_35(lowered, target, limit):
        calls.append(limit)
        if limit < 35 << 20:
            raise RuntimeError("E1001: still too big")

    rec = {"vmem": {"requested": int(33.82 * 2**20), "limit": 32 << 20}}
    near_limit(rec, object(), "v6e", compile_with=fits_at_35)
    near = rec["vmem"]["near_limit"]
    assert near["over"] == pytest.approx(33.82 / 32 - 1) and near["decided_by"].startswith("libtpu")
    assert calls == [35 << 20] and near["fits_with"] == 35 << 20 and "35 MiB" in near["verified"]
    said = near_limit_sentence(rec["vmem"])
    assert "5.7% over the limit" in said and "other compiler versions may differ" in said
    assert "vmem_limit_bytes=36700160 (35 MiB) fits" in said
    far = {"vmem": {"requested": 48 << 20, "limit": 32 << 20}}  # 50% over: not a near-limit finding
    near_limit(far, object(), "v6e", compile_with=fits_at_35)
    assert "near_limit" not in far["vmem"]
    never = {"vmem": {"requested": int(32.5 * 2**20), "limit": 32 << 20}}
    near_limit(never, object(), "v6e", compile_with=lambda *a: (_ for _ in ()).throw(RuntimeError("E1001")))
    assert "fits_with" not in never["vmem"]["near_limit"] and "E1001" in never["vmem"]["near_limit"]["not_verified"]
    assert proposals(int(32.06 * 2**20)) == (34 << 20, 38 << 20)


@pytest.mark.pipeline
@needs_libtpu
@pytest.mark.tpu_compiler
def test_the_checker_offers_the_verified_limit_and_the_fix_compiles():
    loop = asyncio.new_event_loop()
    checker = Checker(CheckOptions(target="v6e", time_limit_s=180.0))
    try:
        with open(FIXTURE, encoding="utf-8") as f:
            text = f.read()
        report = loop.run_until_complete(checker.check(FIXTURE, text=text, tiers=(1, 2)))
        [finding] = [f for f in report.findings if f.code == "PLS201"]
        assert "32.1 MiB requested, limit 32.0 MiB" in finding.message, finding.message
        assert "over the limit: libtpu " in finding.message and "other compiler versions may differ" in finding.message
        assert finding.fix is not None and "vmem_limit_bytes=35651584" in finding.fix.title
        (edit,) = finding.fix.edits
        lines = text.splitlines()
        assert lines[edit.span.line][edit.span.column:].startswith("pltpu.CompilerParams(")
        row = lines[edit.span.line]
        fixed_lines = list(lines)
        fixed_lines[edit.span.line] = row[:edit.span.column] + edit.new_text + row[edit.span.end_column:]
        fixed = "\n".join(fixed_lines) + "\n"
        assert "vmem_limit_bytes=35651584" in fixed
        again = loop.run_until_complete(checker.check(FIXTURE, text=fixed, tiers=(1, 2)))
        assert not [f for f in again.findings if f.severity == "error"], [f.message for f in again.findings]
    finally:
        loop.run_until_complete(checker.close())
        loop.close()

"""The fixer on the corpus of broken/fixed twins (tests/fix_corpus.py), with providers that return
each case's known fix, or a plausible wrong one.

Default run: the tier-0 twins verified by tier 0 (in process, about a second). Benchmark
(``pytest -m benchmark tests/test_fix_corpus.py -s``): every twin, verified by tiers 0-2 in a real
worker (plus tier 3 against reference() where the file has one); prints the figures.
"""

from __future__ import annotations

import time

import pytest

from fix_corpus import Case, cases, proposal, wrong_fixes
from pallasite.agents.edits import touched_lines
from pallasite.agents.fix_action import FixJob, fix_file, targets
from pallasite.agents.fixer import Budgets
from pallasite.agents.llm.providers import ProviderConfig
from pallasite.agents.llm.providers_scripted import ScriptedProvider
from pallasite.engine.checker import CheckOptions, Checker
from pallasite.engine.judge import Judge, Trusted

ONE_ROUND = Budgets(max_rounds=1, max_changed_lines=60)
WRONG_KINDS = ("comment", "suppress")  # must never be offered
INFO_KINDS = ("partial",)  # the first changed line of a multi-line fix: offered only if it really verifies


async def fix_with(checker: Checker, case: Case, reply: str, tiers: tuple[int, ...], report=None):
    report = report or await checker.check(str(case.path), case.broken, tiers=tiers)
    provider = ScriptedProvider(ProviderConfig(name="scripted"), [reply])
    job = FixJob(path=str(case.path), text=case.broken, report=report, chip=checker.options.target, tiers=tiers,
                 docs_passages=0)
    judge = Judge(None, checker.options, Trusted(str(case.path), case.broken), checker=checker)
    return await fix_file(job, provider.config, ONE_ROUND, judge, provider=provider), report


async def measure(selected: list[Case], tiers: tuple[int, ...]) -> dict:
    checker = Checker(CheckOptions(tiers=tiers, time_limit_s=120), untrusted=True)
    figures = {"cases": 0, "verified_minimal": 0, "failures": [], "skipped": [], "wrong": {k: [0, 0] for k in WRONG_KINDS + INFO_KINDS},
               "wrong_offered": [], "info_offered": [], "seconds": 0.0}
    started = time.monotonic()
    try:
        for case in selected:
            report = await checker.check(str(case.path), case.broken, tiers=tiers)
            found = targets(report.findings, None)
            if not found:
                figures["skipped"].append(f"{case.name}: the checker reports no error in the broken file")
                continue
            figures["cases"] += 1
            outcome, _ = await fix_with(checker, case, proposal(case.blocks), tiers, report)
            if outcome.ok and touched_lines(case.broken, outcome.fixed_text) <= case.fix_lines:
                figures["verified_minimal"] += 1
            else:
                figures["failures"].append(f"{case.name}: {outcome.message}"
                                           + (f" / {outcome.attempts[0].detail[:300]}" if outcome.attempts else ""))
            wrong = wrong_fixes(case, sorted({f.span.line for f in found}), sorted({f.code for f in found}))
            for kind, reply in wrong.items():
                bad, _ = await fix_with(checker, case, reply, tiers, report)
                figures["wrong"][kind][1] += 1
                if bad.ok:
                    figures["wrong"][kind][0] += 1
                    figures["wrong_offered" if kind in WRONG_KINDS else "info_offered"].append(f"{case.name} ({kind})")
    finally:
        await checker.close()
    figures["seconds"] = time.monotonic() - started
    return figures


def report_figures(title: str, figures: dict) -> None:
    n = figures["cases"]
    print(f"\n{title}: {figures['verified_minimal']}/{n} known fixes became verified minimal edits "
          f"({100 * figures['verified_minimal'] / max(n, 1):.1f}%), {figures['seconds']:.1f} s")
    for kind, (offered, total) in figures["wrong"].items():
        print(f"  wrong fix '{kind}': {offered}/{total} offered")
    for name in figures["info_offered"]:
        print(f"  offered (verified by the checker): {name}")
    for failure in figures["failures"]:
        print(f"  not verified: {failure}")
    for skipped in figures["skipped"]:
        print(f"  not counted: {skipped}")


async def test_tier0_twins_known_fixes_verified_and_wrong_fixes_never_offered():
    selected = [c for c in cases() if c.name.startswith("tier0/")]
    assert len(selected) >= 15
    figures = await measure(selected, (0,))
    report_figures("tier-0 twins, verified by tier 0", figures)
    assert figures["verified_minimal"] >= 0.95 * figures["cases"] and figures["cases"] >= 14, figures["failures"]
    assert figures["wrong_offered"] == []
    assert sum(figures["wrong"][k][1] for k in WRONG_KINDS) >= 2 * figures["cases"] - 1  # comment + suppress each


@pytest.mark.benchmark
async def test_all_twins_verified_by_the_compiler_tiers():
    figures = await measure(cases(), (0, 1, 2))
    report_figures("all twins, verified by tiers 0-2 (+3 with reference())", figures)
    assert figures["verified_minimal"] >= 0.95 * figures["cases"], figures["failures"]
    assert figures["wrong_offered"] == []

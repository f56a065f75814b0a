"""Eval cases from bare answers, for the metrics and report tests: each case holds a Verdict
(agents/eval_metrics.CaseOutcome), built here the way a stored row of the older form is read."""

from __future__ import annotations

from pallasite.agents.eval_metrics import CaseOutcome
from pallasite.analysis.verdict import Verdict


def case(compiled: bool, correct: bool, speedup: float | None = None, error: str = "", *, candidate: bool = True,
         verified: bool = True, refused: str | None = None, untimed: str | None = None,
         judged_by: str = "the judge") -> CaseOutcome:
    """A case whose Verdict says ``compiled`` / ``correct`` (``verified=False``: not verified), with ``error``
    as the failing phase's evidence; ``candidate=False``: there was none; judged by ``judged_by``."""
    if not candidate:
        verdict = Verdict.no_candidate(error or "no candidate")
    else:
        verdict = Verdict.of(compiled, correct if verified else None, evidence=error or "", judged_by=judged_by)
    return CaseOutcome(verdict, speedup, refused=refused, untimed=untimed)

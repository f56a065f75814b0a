"""The loops' evaluator: the Evaluator Protocol (agents/evaluator.py) over the run's one ``Judge``.

``JudgeEvaluator(judge, fixer=None, tune=True)`` serves optimize, search and eval's agent methods. Every
phase is the judge's (engine/judge.py): ``compile`` its ``compile``, ``test`` its ``test``, ``measure`` its
``time``; this module only turns each typed result into the ``PhaseResult`` the loop records (summary,
evidence for the planner, ``judged_by``). It adds the loop's optional capabilities, which are not
judging: ``fix`` (one round of the verified fixer, re-checked by the judge's check options), ``tune`` (the
candidate's tunables searched by engine/tuning/tune.py on the judge's workers) and ``frozen_tests`` (the written
tests: their hash, and the same evaluator with other tests).

On a device with an eval task the reference is timed beside a candidate (the ``time`` op): its figure
exists only once a candidate has run, and the baseline is unmeasured until then (said so).
"""

from __future__ import annotations

import copy
from typing import Any

from ..analysis.types import to_json
from ..analysis.verdict import CompileResult, JudgedBy, TestResult
from ..engine.judge_phase import unfreeze
from ..engine.tuning.judge_tune import autotune, device_profile

from .evaluator import PhaseResult


def compile_phase(result: CompileResult) -> PhaseResult:
    return PhaseResult(result.ok is True, result.text(), evidence="" if result.ok else result.evidence,
                       compile=result)


def test_phase(test: TestResult, judged_by: JudgedBy = JudgedBy.UNKNOWN, result: Any = None) -> PhaseResult:
    """The test phase from the judge's ``TestResult`` (and the ``time`` reply's result it was read from),
    with what the loop records."""
    if test.outcome == "ok":
        checks = getattr(result, "checks", None) or {}
        return PhaseResult(True, f"matches the reference ({test.why})", test=test, judged_by=judged_by,
                           data={"checks": to_json(checks), "inputs": checks.get("inputs"),
                                 "full_inputs": checks.get("full_inputs"),
                                 "timed": getattr(result, "candidate", None) is not None})
    summary = "rejected by the frozen tests" if test.outcome == "wrong" else "not verified"
    return PhaseResult(False, summary, evidence=test.why, test=test, judged_by=judged_by)


class JudgeEvaluator:
    """See the module docstring. ``tune``: offer the autotune phase (optimize does, the search without a
    device too, eval's agents do not); ``device_profile``: a device measure also takes the ``profile`` op
    (optimize's planner reads it; the search ranks without it)."""

    def __init__(self, judge: Any, *, fixer: Any = None, tune: bool = True, device_profile: bool = True) -> None:
        self.judge = judge
        self.device_profile = device_profile  # measure: also the device's profile (what optimize's planner reads)
        self.method = judge.method
        self.chip = judge.chip
        self.fixer = fixer  # the provider the verified fixer asks in the compile-fix rounds (None: no fixing)
        self.fix = self._fix if fixer is not None else None
        self.tune = self._tune if tune else None
        self.frozen_tests = None if judge.trusted.task else self

    # ------------------------------------------------------------------ the frozen tests

    @property
    def tests(self) -> str | None:
        return self.judge.trusted.tests

    @property
    def frozen(self) -> dict:
        return dict(self.judge.trusted.frozen)

    def use_tests(self, tests: str | None) -> None:
        """From now on ``tests`` are the written tests (frozen: the loop records their hash)."""
        self.judge = self.judge.with_tests(tests)

    def with_tests(self, tests: str | None) -> "JudgeEvaluator":
        other = copy.copy(self)
        other.judge = self.judge.with_tests(tests)
        if other.fix is not None:
            other.fix = other._fix
        if other.tune is not None:
            other.tune = other._tune
        other.frozen_tests = other if self.frozen_tests is not None else None
        return other

    def tests_hash(self) -> str:
        """The identity of the frozen tests (recorded in the run; a resume with other tests is refused)."""
        from .test_writer import tests_hash

        return tests_hash("\n".join(f"{k}\n{v}" for k, v in sorted(self.frozen.items())))

    def frozen_text(self, source: str) -> str:
        return self.judge.trusted.text(source)

    # ------------------------------------------------------------------ the phases

    async def compile(self, source: str) -> PhaseResult:
        return compile_phase(await self.judge.compile(source))

    async def test(self, source: str) -> PhaseResult:
        test = await self.judge.test(source)
        return test_phase(test, self.judge.judged_by(source), self.judge.test_reply(source))

    async def measure(self, source: str) -> PhaseResult:
        judge = self.judge
        if judge.trusted.task and judge.trusted.is_reference(source):
            return self._reference_phase()
        timed = await judge.time(source)
        if judge.device is not None and timed.candidate is not None and timed.candidate.provenance != "device":
            return PhaseResult(False, "not a device timing", evidence=timed.why, judged_by=judge.judged_by(source))
        if timed.candidate is None:
            summary = "not ranked: the estimate is a lower bound" if timed.lower_bound else \
                "not timed" if judge.device is not None else "not estimated"
            return PhaseResult(False, summary, evidence=timed.why or "no figure", judged_by=judge.judged_by(source))
        profile = timed.profile
        if judge.device is not None and not judge.trusted.task and self.device_profile:
            profile = await device_profile(judge, source)
        return PhaseResult(True, timed.summary or f"{timed.candidate.seconds * 1e6:.2f} us", timing=timed.candidate,
                           judged_by=judge.judged_by(source),
                           data={"lower_bound": timed.lower_bound, "profile": profile})

    def _reference_phase(self) -> PhaseResult:
        """The task's reference: estimated beside the candidates by one model, or on a device timed beside a
        candidate (its figure exists only once a candidate has run; before that the baseline is unmeasured)."""
        judge = self.judge
        ref = judge.reference_timing()
        if ref is None and judge.device is None:
            return PhaseResult(False, "not estimated", evidence="the task's reference has no estimate yet")
        if ref is None:
            return PhaseResult(False, "not timed yet", evidence="on a device the reference is timed beside a "
                               "candidate; no candidate has been timed yet")
        return PhaseResult(True, f"{ref.seconds * 1e6:.2f} us", timing=ref)

    # ------------------------------------------------------------------ the capabilities

    async def _fix(self, source: str, failed: PhaseResult) -> PhaseResult:
        """One round of the verified fixer (agents/fixer.py) on a candidate that failed to compile: a
        minimal edit, re-checked by the checker (the judge's check options) before it is returned."""
        from .prompts.fix_prompt import FixContext
        from .fixer import Budgets as FixBudgets
        from .fixer import Fixer

        judge = self.judge
        report = judge.report(source)
        if report is None:
            return PhaseResult(False, "no checker report to fix")
        errors = tuple(f for f in report.findings if str(getattr(f.severity, "value", f.severity)) == "error")
        text = self.frozen_text(source)
        context = FixContext(path=judge.trusted.path, text=text, findings=errors, chip=judge.chip,
                             has_reference="reference" in self.frozen)
        outcome = await Fixer(self.fixer, judge.check, budgets=FixBudgets(max_rounds=1)).fix(
            context, tuple(judge.options.tiers), original_report=report)
        if not outcome.ok or not outcome.fixed_text:
            return PhaseResult(False, outcome.message[:200], evidence=outcome.message, data={"usage": outcome.usage})
        return PhaseResult(True, f"verified fix: {outcome.label}", source=unfreeze(outcome.fixed_text),
                           data={"usage": outcome.usage})

    async def _tune(self, source: str) -> PhaseResult:
        """The candidate's tunables searched (engine/tuning/tune.py): by the cost model for the chip without a
        device, by device timings with one. The best configuration comes back as the changed source
        (the loop re-tests it before taking it)."""
        from ..analysis.source import apply_edits
        from ..engine.tuning.tune import TuneError

        text = self.frozen_text(source)
        try:
            report = await autotune(self.judge, source)
        except TuneError as err:
            message = str(err)
            if "no tunables" in message:
                return PhaseResult(True, "nothing to tune (no tunables in the candidate)", data={"evidence": message})
            return PhaseResult(False, "not tuned", evidence=message[:2000])
        if not report.current:  # tune reports a file without tunables as its one configuration
            return PhaseResult(True, "nothing to tune (no tunables in the candidate)", data={"config": {}})
        counts = f"{len(report.outcomes)} configurations, {sum(report.rejected.values())} rejected before compiling"
        if report.best is None or report.best == report.current or not report.edits:
            return PhaseResult(True, f"kept {dict(report.current)} ({counts}; {report.best_provenance or 'no ranking'})",
                               data={"config": dict(report.current)})
        tuned = unfreeze(apply_edits(text, report.edits))
        gain = report.speedup_vs_current()
        why = f", {gain[0]:.2f}x vs {dict(report.current)} by {gain[1]}" if gain else ""
        return PhaseResult(True, f"{dict(report.best)}{why} ({counts})", source=tuned,
                           data={"config": dict(report.best), "was": dict(report.current)})

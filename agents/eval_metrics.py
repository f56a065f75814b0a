"""The seed's evaluation metrics over a set of tasks, computed the way MaxKernel computes them.

Per task (``TaskOutcome``): it compiled / is correct only if every input case did; its speedup is
the geometric mean over its cases. Over the tasks attempted (``summarize``):

- compile rate and correctness rate (shares of tasks);
- the geometric-mean speedup with each task floored at 1.0x (failed or slower tasks count 1.0x);
- the share "improved" (correct and speedup > 1.05x);
- fast_p: the share of tasks correct and faster than the reference by more than p, for p in [0, 3].

A correct task whose case has no timing is an error (``MissingTiming``), never 1.0x by accident,
unless the case says why it has none (``untimed``: not estimated, not timed): then that task alone
is left out of the speedup figures, with its reason in its row and in ``excluded``; the others keep
theirs. A case whose speedup was REFUSED (analysis/verdict.speedup: the two sides were timed by
different methods or models) carries the refusal, and then the summary has no speedup figures at
all (the geomean, "improved" and fast_p are None, ``speedup_refused`` says why) rather than
numbers that divide two different things. A task with no candidate (its case's Verdict is
``Verdict.no_candidate``: the folder holds only the reference) is failed: not compiled, not correct,
1.0x in the geomean. Each case holds its ``Verdict`` unchanged (compiled, correct, not verified and
the status are read from it), so a task's row says the Verdict's own words.
Every summary carries the provenance of its speedups ("estimate (v5e)", "device (TPU v5 lite)").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from ..analysis.verdict import Timing, Verdict, self_judged

IMPROVED = 1.05
FAST_P = tuple(round(0.1 * i, 1) for i in range(31))  # 0.0, 0.1, ..., 3.0


class MissingTiming(ValueError):
    """A task passed but one of its cases has no (or a non-positive) speedup."""


@dataclass(frozen=True)
class CaseOutcome:
    """One input case: its ``Verdict`` (analysis/verdict.py: the only carrier of compiled / correct /
    not verified / timing), its speedup against the reference and why it has none. ``compiled``,
    ``correct``, ``verified``, ``candidate``, ``status`` and ``error`` read the verdict."""

    verdict: Verdict
    speedup: float | None = None  # reference time / candidate time for this input case
    refused: str | None = None  # why no speedup may be computed (analysis/verdict.try_speedup)
    untimed: str | None = None  # why this passed case has no timing (not estimated, not timed): the task is left out
    reference: Timing | None = None  # the reference's timing by the candidate's method (the pair's other side)
    no_figure: str | None = None  # why the candidate or the reference has no figure ("not estimated: <why>")

    @property
    def compiled(self) -> bool | None:
        """The verdict's: True (compiled for the chip), False (an error, or no candidate), None (not shown)."""
        return self.verdict.compiled

    @property
    def correct(self) -> bool | None:
        """The verdict's: True (compiled and the test passed, judged by the judge), False (wrong, not compiled,
        no candidate), None (not verified, not shown to compile for the chip, or passed where nobody but the
        candidate's own process judged it: counted apart, ``not_judged``): never a pass."""
        if self.verdict.passed and self_judged(self.verdict):
            return None
        return self.verdict.correct

    @property
    def not_judged(self) -> bool:
        """Passed by a word the judge never gave (analysis/verdict.self_judged): counted apart, never correct."""
        return self.verdict.passed and self_judged(self.verdict)

    @property
    def candidate(self) -> bool:
        """False: nothing to evaluate (the reference alone): a failed case."""
        return self.verdict.candidate

    @property
    def verified(self) -> bool:
        """False: correctness was not verified (could not run), which is not "incorrect"."""
        return self.verdict.correct is not None or not self.verdict.candidate

    @property
    def status(self) -> str:
        return self.verdict.status()

    @property
    def error(self) -> str | None:
        return self.verdict.evidence or None


@dataclass(frozen=True)
class TaskOutcome:
    task: str
    cases: tuple[CaseOutcome, ...]
    provenance: str = ""

    @property
    def has_candidate(self) -> bool:
        return bool(self.cases) and all(c.candidate for c in self.cases)

    @property
    def compiled(self) -> bool | None:
        """True: every case compiled for the chip; False: no candidate, or a case did not compile; None: not
        shown for some case (not compiled for the chip, not checked), which is never a pass."""
        return False if not self.has_candidate else _all(c.compiled for c in self.cases)

    def refused(self) -> str | None:
        """Why this correct task has no speedup by rule (mixed methods), or None."""
        if not self.correct:
            return None
        return next((c.refused for c in self.cases if c.refused), None)

    @property
    def correct(self) -> bool | None:
        """True: compiled and every case correct; False: a case wrong or not compiled, or no candidate; None:
        not verified (or not shown to compile) for some case."""
        return False if not self.has_candidate else _all((self.compiled, *(c.correct for c in self.cases)))

    def untimed(self) -> str | None:
        """Why this correct task has no timing to count (it is left out of the speedup figures), or None."""
        if not self.correct:
            return None
        return next((c.untimed for c in self.cases if c.untimed), None)

    def speedup(self) -> float | None:
        """Geomean over the cases of a correct task; None for a task that failed or has no timing."""
        if not self.correct or self.refused() or self.untimed():
            return None
        for i, c in enumerate(self.cases):
            if c.speedup is None or not math.isfinite(c.speedup) or c.speedup <= 0:
                why = f": {c.error}" if c.error else ""
                raise MissingTiming(f"task {self.task!r}: case {i} passed but has no timing "
                                    f"(speedup {c.speedup!r}{why}); re-run its timing rather than counting it as 1.0x")
        return _geomean([c.speedup for c in self.cases])

    def scored(self) -> float:
        """The task's contribution to the geomean: its speedup floored at 1.0x; failures count 1.0x."""
        s = self.speedup()
        return max(s, 1.0) if s is not None else 1.0

    def errors(self) -> list[str]:
        return [c.error for c in self.cases if c.error]


@dataclass(frozen=True)
class Summary:
    method: str
    provenance: str
    tasks: int
    compile_rate: float
    correct_rate: float
    geomean_speedup: float | None  # each task floored at 1.0x, failures 1.0x; None: refused (speedup_refused)
    improved_share: float | None  # correct and > 1.05x
    fast_p: tuple[tuple[float, float], ...] = field(default_factory=tuple)  # (p, share)
    per_task: tuple[dict[str, Any], ...] = ()
    wall_s: float | None = None
    with_candidate: int = 0  # tasks that had a candidate (the others are "no candidate": failed)
    speedup_refused: str | None = None  # why there are no speedup figures
    excluded: tuple[tuple[str, str], ...] = ()  # (task, why): correct but untimed, left out of the speedup figures
    not_judged: tuple[str, ...] = ()  # tasks that passed where the judge did not judge them: not counted correct

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["fast_p"] = [list(x) for x in self.fast_p]
        data["excluded"] = [list(x) for x in self.excluded]
        data["baseline"] = "the task's reference (XLA), per task on its listed inputs"
        return data


def _all(answers: Iterable[bool | None]) -> bool | None:
    """Tri-state "all": False when one is False, True when all are True, else None (not shown)."""
    answers = tuple(answers)
    return False if any(a is False for a in answers) else True if all(a is True for a in answers) else None


def _geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 1.0


def fast_p(outcomes: Sequence[TaskOutcome], ps: Sequence[float] = FAST_P) -> tuple[tuple[float, float], ...]:
    """The share of tasks correct with speedup > p, for each p."""
    n = len(outcomes)
    speeds = [o.speedup() for o in outcomes]
    return tuple((p, sum(1 for s in speeds if s is not None and s > p) / n if n else 0.0) for p in ps)


def summarize(method: str, outcomes: Sequence[TaskOutcome], *, provenance: str, wall_s: float | None = None) -> Summary:
    """The metrics over every attempted task (raises MissingTiming for a passed task without a timing)."""
    if not outcomes:
        raise ValueError(f"method {method!r}: no tasks were attempted, so there is nothing to summarize")
    n = len(outcomes)
    speeds = [o.speedup() for o in outcomes]  # raises before any number is computed
    refused = next((o.refused() for o in outcomes if o.refused()), None)
    excluded = tuple((o.task, o.untimed()) for o in outcomes if o.untimed())
    per_task = tuple({"task": o.task, "candidate": o.has_candidate, "compiled": o.compiled, "correct": o.correct,
                      "status": _status(o), "speedup": s,
                      "scored": None if o.untimed() else max(s, 1.0) if s is not None else 1.0,
                      "speedup_refused": o.refused(), "excluded": o.untimed(), "cases": len(o.cases),
                      "reference": o.cases[0].reference.to_json() if o.cases and o.cases[0].reference else None,
                      "timing": o.cases[0].verdict.timing.to_json() if o.cases and o.cases[0].verdict.timing else None,
                      "no_figure": next((c.no_figure for c in o.cases if c.no_figure), None) if o.has_candidate else None,
                      "provenance": o.provenance or provenance, "errors": o.errors()[:3]}
                     for o, s in zip(outcomes, speeds))
    counted = [o for o in outcomes if not o.untimed()]  # the speedup figures are over these tasks
    m = len(counted)
    return Summary(
        method=method, provenance=provenance, tasks=n,
        compile_rate=sum(o.compiled is True for o in outcomes) / n,
        correct_rate=sum(o.correct is True for o in outcomes) / n,
        geomean_speedup=None if refused or not m else _geomean([t["scored"] for t in per_task if t["scored"] is not None]),
        improved_share=None if refused or not m else sum(1 for o in counted if (o.speedup() or 0) > IMPROVED) / m,
        fast_p=() if refused or not m else fast_p(counted), per_task=per_task, wall_s=wall_s,
        with_candidate=sum(o.has_candidate for o in outcomes), speedup_refused=refused, excluded=excluded,
        not_judged=tuple(o.task for o in outcomes if any(c.not_judged for c in o.cases)))


def _status(o: TaskOutcome) -> str:
    """The task's status in the one vocabulary (analysis/verdict.STATUSES): its case's Verdict's; over several
    cases, the first case that is not compiled and correct says it."""
    if not o.cases:
        return "no candidate"
    return next((c.status for c in o.cases if c.correct is not True), o.cases[0].status)

"""The verified fixer: a model proposes a minimal edit; the checker proves it before anyone sees it.

    fixer = Fixer(provider, verify, budgets=Budgets(max_rounds=3), recorder=recorder)
    outcome = await fixer.fix(context, tiers=(0, 1, 2))
    outcome.ok, outcome.diff, outcome.label, outcome.attempts, outcome.usage

One round: ask the model (prompt from fix_prompt.py) -> parse its search/replace blocks -> apply
them in memory to the original text -> require every original ``pallas_call`` to still be there and
the file's tests (reference, inputs, TOLERANCE: engine/guards.py) untouched ->
re-run the checker's tiers on the new text (``verify``: tiers 1-3 run in worker processes, so the
model's code never runs here) plus tier 3 against ``reference()`` when the file has one -> accept
only when the findings being fixed are gone and no new error appeared. A rejected proposal's reason
(the new compiler error, the edit that did not apply, ...) goes back to the model in the next
round, up to ``max_rounds``, within the token and time budgets. The outcome is either a verified
minimal edit with an honest label in analysis/verdict's words ("compiled for v6e (tiers 0,1,2);
not verified: no reference()" without a reference) or "no verified fix" listing what was tried. An unverified edit is never returned.

``verify`` is the one narrow seam to the engine: ``async (text, tiers) -> FileReport``
(the run's judge's ``check``, engine/judge.py).
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from ..analysis.codes import COULD_NOT_CHECK
from ..analysis.tier0 import analyze
from ..analysis.types import FileReport
from ..analysis.verdict import TestResult, compile_result

from .llm import keys
from .llm.recording import CallRecord, Recorder
from .edits import PROPOSAL_SCHEMA, EditError, Hunk, SearchReplace, apply_edits, hunks, parse_proposal, unified_diff
from .prompts.fix_prompt import SYSTEM, FixContext, prompt
from .deadline import Deadline, bounded
from .fix_scope import unsafe_edit
from ..engine.guards import frozen_names, tampering
from .llm.providers import ModelRequest, Provider, ProviderError, Usage

Verify = Callable[[str, tuple[int, ...]], Awaitable[FileReport]]
ProgressFn = Callable[[str], Any]


@dataclass(frozen=True)
class Budgets:
    """Limits of one fix action (the ``agent`` settings)."""

    max_rounds: int = 3
    max_tokens: int = 200_000  # input + output + thinking, summed over the action's calls
    max_seconds: float = 300.0  # wall clock of the whole action, model calls and checks together
    request_timeout_s: float = 120.0  # one model call
    max_changed_lines: int = 40  # a proposal touching more lines is not a minimal edit
    max_output_tokens: int = 16384  # a cap per reply (thinking models spend part of it thinking)


@dataclass(frozen=True)
class Attempt:
    """One round: what the model proposed and what became of it."""

    round: int
    verdict: str  # "verified", "still failing", "not applicable", "unreadable", "removed pallas_call",
    #               "too large", "silenced", "changes the tests", "model error", "check failed"
    detail: str
    explanation: str = ""
    diff: str = ""
    error: dict | None = None  # a model error: kind, status, retry_after_s, message (ProviderError.as_json)


@dataclass(frozen=True)
class FixOutcome:
    ok: bool
    path: str
    message: str  # one line for the user: the label, or why there is no verified fix
    label: str = ""  # what was verified (analysis/verdict's words), e.g. "compiled for v6e (tiers 0,1,2); not verified: no reference()"
    fixed_text: str | None = None  # only when ok
    hunks: tuple[Hunk, ...] = ()
    diff: str = ""
    explanation: str = ""
    attempts: tuple[Attempt, ...] = ()
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    run_id: str = ""
    provider: str = ""
    tiers: tuple[int, ...] = ()
    verdicts: tuple[tuple[str, tuple[tuple[int, str], ...]], ...] = ()  # kernel -> (tier, status) of the fix


class _OutOfTime(Exception):
    """agent.maxSeconds ran out while a proposal was being checked (the check was cancelled)."""


class _Rejected(Exception):
    def __init__(self, verdict: str, detail: str) -> None:
        super().__init__(detail)
        self.verdict, self.detail = verdict, detail


@dataclass
class _Run:
    """One fix action across its rounds: its id, clock and tiers, what each proposal is measured against
    (the errors allowed, the original pallas_call sites), and what the rounds spent and tried."""

    run_id: str
    started: float
    deadline: Deadline
    tiers: tuple[int, ...]
    allowed: Counter
    original_sites: Counter
    usage: Usage = field(default_factory=Usage)
    attempts: list[Attempt] = field(default_factory=list)
    history: list[str] = field(default_factory=list)  # what the next prompt tells the model of earlier rounds
    stop: str = ""  # why the run stopped before its rounds ran out
    halted: bool = False  # a round ended the run (``stop`` says why, where the error said)


class Fixer:
    def __init__(self, provider: Provider, verify: Verify, *, budgets: Budgets = Budgets(),
                 recorder: Recorder | None = None, on_progress: ProgressFn | None = None) -> None:
        self.provider, self.verify, self.budgets = provider, verify, budgets
        self.recorder, self.on_progress = recorder, on_progress

    async def fix(self, context: FixContext, tiers: Sequence[int] = (0, 1, 2),
                  original_report: FileReport | None = None) -> FixOutcome:
        """Up to ``max_rounds`` proposals for ``context.findings``; the first verified one wins."""
        run = self._start(context, tiers, original_report)
        for round_no in range(1, self.budgets.max_rounds + 1):
            left_s = run.deadline.left()
            run.stop = self._spent(run.usage, left_s)
            if run.stop:
                break
            outcome = await self._round(context, run, round_no, left_s, original_report)
            if outcome is not None:
                self._summary(outcome)
                return outcome
            if run.halted:
                break
        tried = "; ".join(f"round {a.round}: {a.verdict}" for a in run.attempts) or "no round ran"
        why = f" ({run.stop})" if run.stop else ""
        outcome = FixOutcome(
            ok=False, path=context.path, message=f"no verified fix{why}: {tried}", attempts=tuple(run.attempts),
            usage=run.usage, seconds=time.monotonic() - run.started, run_id=run.run_id, provider=self.provider.name,
            tiers=run.tiers)
        self._summary(outcome)
        return outcome

    def _start(self, context: FixContext, tiers: Sequence[int], original_report: FileReport | None) -> _Run:
        """The run's clock, id and tiers, and what every proposal is measured against: the errors the
        original file already had (less the ones being fixed) and its pallas_call sites."""
        started = time.monotonic()
        deadline = Deadline(self.budgets.max_seconds, "agent.maxSeconds")  # bounds the checks too
        run_id = uuid.uuid4().hex[:12]
        # tier 3 (running the kernel against reference()) only where the compiler tiers may run code
        runs_code = any(t > 0 for t in tiers)
        tiers = tuple(sorted(set(tiers) | ({3} if context.has_reference and runs_code else set())))
        baseline = Counter(f.code for f in (original_report.findings if original_report else context.findings)
                           if f.severity == "error")
        targeted = Counter(f.code for f in context.findings)
        allowed = Counter({code: max(0, n - targeted[code]) for code, n in baseline.items()})
        return _Run(run_id, started, deadline, tiers, allowed, _site_keys(context.text, context.path, context.chip))

    def _spent(self, usage: Usage, left_s: float) -> str:
        """Why the run stops before its next round (a budget spent), else ""."""
        if usage.total_tokens >= self.budgets.max_tokens:
            return f"token budget spent ({usage.total_tokens} of {self.budgets.max_tokens})"
        if left_s <= 1:
            return f"time budget spent ({self.budgets.max_seconds:g} s)"
        return ""

    async def _round(self, context: FixContext, run: _Run, round_no: int, left_s: float,
                     original_report: FileReport | None) -> FixOutcome | None:
        """One round: ask, read the proposal, check it. The verified outcome, else None with the attempt
        recorded (and ``run.halted`` set when the run cannot go on)."""
        reply = await self._ask(context, run, round_no, left_s)
        if reply is None:
            return None
        try:
            proposal = parse_proposal(reply.text)
        except EditError as err:
            run.attempts.append(Attempt(round_no, "unreadable", str(err)))
            run.history.append(f"Round {round_no}: your reply could not be read: {err}")
            return None
        try:
            candidate, report = await self._check(context, proposal.edits, run.tiers, run.original_sites, run.allowed,
                                                  original_report, run.deadline, round_no)
        except _OutOfTime as out:
            run.attempts.append(Attempt(round_no, "check failed", str(out)))
            run.stop, run.halted = str(out), True
            return None
        except _Rejected as rej:
            diff = keys.redact(_safe_diff(context, proposal.edits))
            run.attempts.append(Attempt(round_no, rej.verdict, rej.detail, keys.redact(proposal.explanation), diff))
            run.history.append(f"Round {round_no}: you proposed:\n{_blocks(proposal.edits)}\n"
                               f"It was rejected ({rej.verdict}): {rej.detail}")
            return None
        label = _label(report, run.tiers, context.chip, context.has_reference)
        diff = keys.redact(unified_diff(context.text, candidate, context.path))  # shown; the edit is exact
        run.attempts.append(Attempt(round_no, "verified", label, keys.redact(proposal.explanation), diff))
        return FixOutcome(
            ok=True, path=context.path, message=f"verified fix: {label}", label=label, fixed_text=candidate,
            hunks=tuple(hunks(context.text, candidate)), diff=diff, explanation=keys.redact(proposal.explanation),
            attempts=tuple(run.attempts), usage=run.usage, seconds=time.monotonic() - run.started, run_id=run.run_id,
            provider=self.provider.name, tiers=run.tiers,
            verdicts=tuple((v.name, v.tiers) for v in report.kernels))

    async def _ask(self, context: FixContext, run: _Run, round_no: int, left_s: float) -> Any:
        """The model's reply for this round (recorded, its usage counted), or None after a model error
        (an attempt; ``run.halted`` set for an error no retry can mend)."""
        self._progress(f"round {round_no}: asking {self.provider.name}")
        text_prompt = keys.redact(prompt(context, run.history))
        request = ModelRequest(system=SYSTEM, prompt=text_prompt, schema=PROPOSAL_SCHEMA, schema_name="kernel_fix",
                               max_output_tokens=self.budgets.max_output_tokens,
                               timeout_s=max(1.0, min(self.budgets.request_timeout_s, left_s)))
        call_started = time.monotonic()
        try:
            reply = await self.provider.complete(request)
        except ProviderError as err:
            self._record(run.run_id, round_no, request, None, err.message, Usage(), time.monotonic() - call_started)
            run.attempts.append(Attempt(round_no, "model error", f"{err.describe()}: {err.message}",
                                        error=err.as_json()))
            if err.kind in ("config", "auth", "refused"):
                run.stop, run.halted = err.message, True
            elif err.kind == "too_large":  # the model's own doing: tell it, like a format error
                run.history.append(f"Round {round_no}: your reply was refused unread: {err.message}. Answer with "
                                   "a minimal edit only.")
            return None
        run.usage = run.usage + reply.usage
        self._record(run.run_id, round_no, request, reply.text, None, reply.usage, reply.seconds, reply.model)
        return reply

    async def _check(self, context: FixContext, edits: Sequence[SearchReplace], tiers: tuple[int, ...],
                     original_sites: Counter, allowed: Counter, original_report: FileReport | None,
                     deadline: Deadline | None = None, round_no: int = 1) -> tuple[str, FileReport]:
        allowed = Counter(allowed)  # each proposal is measured against the original file afresh
        try:
            candidate = apply_edits(context.text, tuple(edits))
        except EditError as err:
            raise _Rejected("not applicable", str(err)) from None
        changed = sum(max(h.end - h.start, len(h.lines)) for h in hunks(context.text, candidate))
        if changed > self.budgets.max_changed_lines:
            raise _Rejected("too large", f"the edit changes {changed} lines; a fix here must change at most "
                                         f"{self.budgets.max_changed_lines} (agent.maxChangedLines)")
        silenced = [what for what, pattern in _SILENCERS if len(pattern.findall(candidate)) > len(pattern.findall(context.text))]
        if silenced:
            raise _Rejected("silenced", f"the edit adds {' and '.join(silenced)}: that hides the error instead of "
                                        "fixing it")
        changed = tampering(context.text, candidate, frozen_names(context.path))
        if changed:
            raise _Rejected("changes the tests", f"the edit {'; '.join(changed)}: a fix must pass the file's own "
                                                 "tests, not change them")
        missing = original_sites - _site_keys(candidate, context.path, context.chip)
        if missing:
            names = ", ".join(f"pallas_call of {k or '?'} in {f or 'module'}" for f, k in missing)
            raise _Rejected("removed pallas_call", f"the edit removes or renames {names}; every original "
                                                   "pallas_call must stay")
        beyond = unsafe_edit(context.text, candidate, context.findings)
        if beyond:  # verified means minimal: never code the findings do not call for (agents/fix_scope.py)
            raise _Rejected("not a minimal fix", f"the edit {'; '.join(beyond)}: a verified fix changes only what the "
                                                 "findings name and adds no imports, file, process or network calls")
        self._progress("checking the proposed edit (tiers " + ", ".join(map(str, tiers)) + ")")
        try:
            report = await bounded(deadline, self.verify(candidate, tiers), f"checking round {round_no}'s proposal",
                                   _OutOfTime)
        except (asyncio.CancelledError, _OutOfTime):
            raise
        except Exception as err:  # the engine failed: the edit is not verified, so it is not offered
            raise _Rejected("check failed", f"the checker could not run ({type(err).__name__}: {err})") from None
        errors = [f for f in report.findings if f.severity == "error"]
        over = [f for f in errors if _take(allowed, f.code)]
        if over:
            lines = candidate.splitlines()
            from .prompts.fix_prompt import describe_finding

            raise _Rejected("still failing", "the checker reports on the edited file:\n"
                            + "\n".join(describe_finding(f, lines) for f in over[:5]))
        could_not = Counter(f.code for f in (original_report.findings if original_report else ())
                            if f.code in COULD_NOT_CHECK)
        stopped = [f for f in report.findings if f.code in COULD_NOT_CHECK and _take(could_not, f.code)]
        if stopped:  # e.g. a top-level statement stopped at its share of the import time: not a pass
            raise _Rejected("still failing", "the edited file could not be fully checked: " + "; ".join(
                f"{f.code} at line {f.span.line + 1}: {f.message[:300]}" for f in stopped[:3]))
        unverified = _unverified_tiers(report, tiers, original_report)
        if unverified:
            raise _Rejected("still failing", "the edited file could not be fully checked: " + "; ".join(unverified))
        return candidate, report

    # ------------------------------------------------------------------ recording and progress

    def _record(self, run_id: str, step: int, request: ModelRequest, response: str | None, error: str | None,
                usage: Usage, seconds: float, model: str | None = None) -> None:
        if self.recorder is None:
            return
        self.recorder.call(CallRecord(
            run_id=run_id, step=step, provider=self.provider.name, model=model or self.provider.model,
            system=keys.redact(request.system), prompt=keys.redact(request.prompt),
            response=keys.redact(response) if response is not None else None,
            error=keys.redact(error) if error else None,
            usage={"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                   "thinking_tokens": usage.thinking_tokens, "cost_usd": usage.cost_usd},
            seconds=seconds))

    def _summary(self, outcome: FixOutcome) -> None:
        if self.recorder is not None:
            self.recorder.summary(outcome.run_id, outcome_json(outcome, include_text=False))

    def _progress(self, message: str) -> None:
        if self.on_progress is not None:
            self.on_progress(message)


# --------------------------------------------------------------------------- helpers

# Edits that make a finding disappear without fixing the kernel, read from the text. (Interpret mode is
# decided from what the worker traced: runner/tier3/interpret_guard.py reports PLS114, in any spelling.)
_SILENCERS = (
    ("a `# pallasite: ignore` comment", re.compile(r"pallasite:\s*ignore")),
    ("a try/except", re.compile(r"^\s*try\s*:", re.M)),
)


def _site_keys(text: str, path: str, chip: str) -> Counter:
    """Each pallas_call as (enclosing function, kernel name): what a fix must keep."""
    return Counter((s.enclosing_function, s.kernel_name) for s in analyze(text, path, target=chip).sites)


def _take(allowed: Counter, code: str) -> bool:
    """Count one error of ``code`` against what the original file already had; True if it is new."""
    if allowed[code] > 0:
        allowed[code] -= 1
        return False
    return True


def _unverified_tiers(report: FileReport, tiers: tuple[int, ...], original: FileReport | None) -> list[str]:
    """Compiler tiers that failed on a kernel of the edited file, or that ran on the original file
    but not on the edited one (a tier that did not run proved nothing, e.g. after an edit that
    broke example_inputs())."""
    ran_before = {(v.name, t) for v in (original.kernels if original else ()) for t, s in v.tiers
                  if s in ("ok", "error")}
    problems = []
    for verdict in report.kernels:
        for tier, status in verdict.tiers:
            if tier not in tiers or tier == 0 or status == "ok":
                continue
            if status == "error" or (verdict.name, tier) in ran_before:
                problems.append(f"{verdict.name}: tier {tier} {status}")
    return problems


def _label(report: FileReport, tiers: tuple[int, ...], chip: str, has_reference: bool) -> str:
    """What the fix was verified to be, in the one vocabulary (analysis/verdict.Verdict.text)."""
    ran = {t for v in report.kernels for t, s in v.tiers if s == "ok"}
    compiled = compile_result(report, tuple(t for t in tiers if t < 3), chip)
    if 3 in ran and has_reference:
        test = TestResult.ok("matches reference() in TPU interpret mode (CPU)")
    else:
        test = TestResult.not_verified("no reference()" if not has_reference else "tier 3 (interpret mode) not run")
    return f"{compiled.text()}; {'correct: ' if test.outcome == 'ok' else 'not verified: '}{test.why}"


def _blocks(edits: Sequence[SearchReplace]) -> str:
    return "\n".join(f"<<<<<<< SEARCH\n{e.search}\n=======\n{e.replace}\n>>>>>>> REPLACE" for e in edits)


def _safe_diff(context: FixContext, edits: Sequence[SearchReplace]) -> str:
    try:
        return unified_diff(context.text, apply_edits(context.text, tuple(edits)), context.path)
    except EditError:
        return ""


def outcome_json(outcome: FixOutcome, *, include_text: bool = True) -> dict:
    """The outcome as plain JSON (``pallasite fix --format json``, the editor command's answer, the
    store's run summary). Like `pallasite check`'s JSON: snake_case keys, lines 1-based; an edit
    replaces lines ``line`` .. ``end_line - 1`` (``end_line`` exclusive) with ``new_text``."""
    data = {
        "ok": outcome.ok, "path": outcome.path, "message": outcome.message, "label": outcome.label,
        "explanation": outcome.explanation, "diff": outcome.diff,
        "edits": [{"line": h.start + 1, "end_line": h.end + 1, "new_text": "".join(h.lines)} for h in outcome.hunks],
        "rounds": len(outcome.attempts),
        "attempts": [{"round": a.round, "verdict": a.verdict, "detail": a.detail, "explanation": a.explanation,
                      "diff": a.diff, **({"error": a.error} if a.error else {})} for a in outcome.attempts],
        "usage": {"calls": outcome.usage.calls, "input_tokens": outcome.usage.input_tokens,
                  "output_tokens": outcome.usage.output_tokens, "thinking_tokens": outcome.usage.thinking_tokens,
                  "cost_usd": outcome.usage.cost_usd},
        "seconds": round(outcome.seconds, 3), "run_id": outcome.run_id, "provider": outcome.provider,
        "tiers": list(outcome.tiers),
        "verdicts": {name: {str(t): s for t, s in tiers} for name, tiers in outcome.verdicts},
    }
    if include_text:
        data["fixed_text"] = outcome.fixed_text
    return data



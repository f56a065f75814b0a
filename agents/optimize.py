"""The "optimize this kernel" loop: plan -> implement -> compile-fix -> test -> autotune -> profile.

    state = new_run(path, original_text)
    result = await optimize(state, provider, evaluator, options, recorder=recorder, gate=None)
    result.best, result.table()

``iterate(state, provider, evaluator, options)`` is one iteration (the seam graph search builds
on: inject any provider and any ``Evaluator``). ``optimize`` loops over it within the budgets.
Step mode is the same loop with a ``gate``: after each phase it is awaited with what the phase
produced and answers approve / revise (the user's text is the new instruction) / stop.

Honesty: every candidate is ranked by ONE method, ``evaluator.method`` (device time, or the cost
model's estimate for a named chip); a candidate that failed compile or test has ``valid=False`` and
can never be ``best``. The baseline is the original file measured by the same method. The winner
rule is analysis/verdict.pick_winner: only a correct candidate faster than the original by the same
method wins (``RunState.winner``); otherwise ``RunState.outcome().why`` says "no winner: <why>".
Every iteration is snapshotted through ``recorder`` (source, plan, results, tokens, seconds); a run
resumes from its snapshots (``resume_state``).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Awaitable, Callable, NoReturn

from ..analysis.verdict import (COST_MODEL, CompileResult, JudgedBy, TestResult, Timing, Verdict, Winner, pick_winner,
                                rank, self_judged, try_speedup)

from . import implementer, planner
from .deadline import Deadline, bounded
from .evaluator import Evaluator, PhaseResult  # noqa: F401 - re-exported: the loop's seam types
from .llm.model_client import ModelClient, at_step
from .llm.providers import ModelRequest, Provider, ProviderError, Usage

PHASES = ("plan", "implement", "compile", "test", "autotune", "profile")


@dataclass(frozen=True)
class Decision:
    """Step mode's answer after a phase: "approve", "revise" (``text`` is the instruction), "stop"
    (``why``, where given, says why when it was not the user's answer, e.g. input ended)."""

    action: str = "approve"
    text: str = ""
    why: str = ""


Gate = Callable[[str, dict], Awaitable[Decision]]
OnPhase = Callable[[int, str, str], Any]  # (iteration, phase, message)


@dataclass(frozen=True)
class Budgets:
    iterations: int = 3
    max_tokens: int = 500_000
    max_seconds: float = 1800.0
    fix_rounds: int = 1  # compile-fix rounds (the evaluator's ``fix``) per candidate
    request_timeout_s: float = 120.0
    seconds_name: str = "--time-limit"  # how the user set max_seconds (named when it ends the run)
    test_rounds: int = 3  # the test writer's proposals at most (a file without tests)


@dataclass
class Iteration:
    index: int
    plan: str = ""
    summary: str = ""
    source: str | None = None
    phases: list[dict] = field(default_factory=list)  # {"phase", "ok", "summary", "seconds"}
    verdict: str = "not run"  # the loop's word: "valid", a Verdict status ("not compiled", "compiled, wrong",
    # "compiled, not verified", ...), "not measured", "no candidate", "model error", "stopped"
    evidence: str = ""
    profile: str = ""  # the profile phase's evidence (device profile, or the cost model's breakdown, labelled)
    tokens: int = 0
    seconds: float = 0.0
    result: Verdict | None = None  # the candidate's verdict, combined from its phases' typed results: the only
    # carrier of compiled / correct / not verified / timing (``valid``, ``time_s`` and ``label`` read it)

    @property
    def valid(self) -> bool:
        """Compiled for the chip, correct, and timed by the run's method: a candidate that may rank."""
        return self.result is not None and self.result.passed and self.result.timing is not None

    @property
    def time_s(self) -> float | None:
        return self.result.timing.seconds if self.valid else None

    @property
    def label(self) -> str:
        return self.result.timing.label() if self.valid else ""


@dataclass
class RunState:
    run_id: str
    path: str
    original: str
    method: str = ""
    baseline: Timing | None = None  # the original's timing by the run's one method, as the evaluator made it
    iterations: list[Iteration] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    stopped: str = ""
    context: dict = field(default_factory=dict)  # findings, chip table, docs: what the planner reads

    @property
    def best(self) -> Iteration | None:
        """The first of the one ranking (analysis/verdict.rank) among the iterations that may rank (compiled,
        correct, timed by the run's one method): judged by the judge, then the fastest; a candidate the judge
        did not judge is never the best. What the next iteration starts from."""
        valid = [it for it in self.iterations if it.valid]
        pace = {it.index: 1.0 / it.time_s for it in valid if it.time_s}  # one method (the run's): comparable
        order = rank(None, [(it.index, self.verdict(it)) for it in valid], given=pace, method=self.method).order
        first = next((it for it in valid if order and it.index == order[0]), None)
        return None if first is None or self_judged(self.verdict(first)) else first

    def speedup(self) -> float | None:
        """The fastest valid candidate against the original, by analysis/verdict.speedup (None when the
        two were not timed by the same method)."""
        best = self.best
        if best is None:
            return None
        s, _ = try_speedup(self.baseline_timing(), self.verdict(best).timing, baseline_name="the original file")
        return s.value if s else None

    def baseline_timing(self) -> Timing | None:
        """The original's figure by the run's one method, as measured."""
        return self.baseline

    @property
    def baseline_s(self) -> float | None:
        return self.baseline.seconds if self.baseline is not None else None

    @property
    def baseline_label(self) -> str:
        return self.baseline.label() if self.baseline is not None else ""

    def verdict(self, it: Iteration) -> Verdict:
        """The iteration's verdict, as its phases made it; one that ended before a verdict (no candidate, a
        stop during its compile): no candidate, or its compile phase's answer and not verified."""
        if it.result is not None:
            return it.result
        if it.source is None:
            return Verdict.no_candidate(it.evidence or it.verdict)
        wrong = it.verdict in ("compiled, wrong", "incorrect")  # an older record's word for a rejected candidate
        return Verdict.of(_phase_ok(it, "compile"), False if wrong else None, None, it.evidence or it.verdict)

    def _speedup_of(self, it: Iteration) -> float | None:
        s, _ = try_speedup(self.baseline_timing(), self.verdict(it).timing, baseline_name="the original file")
        return s.value if s and it.valid else None

    def outcome(self) -> Winner:
        """The winner rule (analysis/verdict.pick_winner) over the iterations, against the original."""
        return pick_winner(self.baseline_timing(), [(it.index, self.verdict(it)) for it in self.iterations],
                           baseline_name="the original file")

    @property
    def winner(self) -> Iteration | None:
        """The winner (a correct candidate faster than the original by the same method: what gets written
        or applied), else None; ``outcome().why`` says why not."""
        index = self.outcome().name
        return next((it for it in self.iterations if it.index == index), None) if index is not None else None

    def table(self) -> list[dict]:
        """The final table: one row per iteration (what the CLI, the hover and replay print)."""
        rows = []
        winner = self.winner
        for it in self.iterations:
            v = self.verdict(it)
            rows.append({"iteration": it.index, "plan": it.summary, "loop_word": it.verdict, "verdict": v.to_json(),
                         "compiled": v.compiled, "correct": v.correct, "status": v.status(), "verdict_text": v.text(),
                         "time_s": it.time_s, "label": it.label, "judged_by": v.judged_by.value,
                         "speedup": self._speedup_of(it),
                         "tokens": it.tokens, "seconds": round(it.seconds, 3),
                         "best": winner is it,  # the winner only: never a slower or unmeasured candidate
                         "why": _why(it)})
        return rows


def row_word(row: dict) -> str:
    """A table row's word: its Verdict's status (analysis/verdict.STATUSES), with the loop's word after it
    when the loop ended otherwise than by the verdict ("compiled, correct (not measured)", "no candidate
    (model error)", "... (stopped)")."""
    loop = row.get("loop_word", "")
    if loop in ("valid", row["status"]) or not loop:
        return row["status"]
    return f"{row['status']} ({loop})"


def _why(it: Iteration) -> str:
    """Why an iteration failed, in one line: a model error's description, else the evidence's last line
    (a traceback's exception); empty for a valid candidate."""
    if it.valid or not it.evidence:
        return ""
    if it.verdict == "model error":
        return it.evidence[:300]
    lines = [line.strip() for line in it.evidence.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


class Stop(Exception):
    """The run stops (budget spent, user stopped): ``reason`` is reported."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def new_run(path: str, original: str, run_id: str | None = None) -> RunState:
    return RunState(run_id=run_id or uuid.uuid4().hex[:12], path=path, original=original)


def timing_for(seconds: float | None, label: str, chip: str = "") -> Timing | None:
    """The ``Timing`` behind a figure and its label in a record stored before timings were kept whole
    (a run snapshot's ``time_s``/``label``, a search node's ``time_s``/``provenance``): reading old
    stores only; the live loops carry the evaluator's ``Timing`` and never read one from a label.
    None without a figure. Other labels are not TPU time (host)."""
    if not seconds:
        return None
    inner = label[label.find("(") + 1:label.rfind(")")] if "(" in label else ""
    if label.startswith("device"):
        return Timing(seconds, "device", inner, method=label)
    if label.startswith("estimate"):  # "estimate (v6e)" or "estimate (<model>, <chip>)": the chip is last
        parts = [p.strip() for p in inner.split(",") if p.strip()]
        model = ", ".join(parts[:-1]) or COST_MODEL
        return Timing(seconds, "estimate", parts[-1] if parts else chip, model, label)
    if label.startswith("interpret"):
        return Timing(seconds, "interpret", "cpu", method=label)
    return Timing(seconds, "host", inner, method=label)


def _phase_ok(it: Iteration, name: str) -> bool | None:
    found = [p["ok"] for p in it.phases if p["phase"] == name]
    return found[-1] if found else None


async def _ask(provider: Provider, request: ModelRequest, state: RunState, it: Iteration,
               recorder: Any, budgets: Budgets) -> str:
    """One model call through the run's model client (agents/llm/model_client.py: recorded at the iteration)."""
    if state.usage.total_tokens >= budgets.max_tokens:
        raise Stop(f"token budget spent ({state.usage.total_tokens} >= {budgets.max_tokens})")
    client = provider if isinstance(provider, ModelClient) else ModelClient(provider, run_id=state.run_id,
                                                                            recorder=recorder)
    with at_step(it.index):
        reply = await client.complete(request)
    state.usage = state.usage + reply.usage
    it.tokens += reply.usage.total_tokens
    return reply.text


def _history(state: RunState) -> list[dict]:
    return [{"iteration": it.index, "plan": it.summary, "verdict": it.verdict, "time_s": it.time_s,
             "label": it.label, "evidence": it.evidence[:1500], "profile": it.profile[:1500]}
            for it in state.iterations]


class _Ended(Exception):
    """The iteration ended before the profile phase; its verdict and evidence are already set."""


@dataclass
class _Steps:
    """One iteration's phases as steps over one candidate; a step that ends the iteration sets its verdict
    and raises ``_Ended`` (a stop raises ``Stop``)."""

    state: RunState
    provider: Provider
    evaluator: Evaluator
    budgets: Budgets
    it: Iteration
    recorder: Any = None
    gate: Gate | None = None
    on_phase: OnPhase | None = None
    deadline: Deadline | None = None

    def __post_init__(self) -> None:
        self.base = self.state.best.source if self.state.best else self.state.original

    def say(self, name: str, message: str) -> None:
        if self.on_phase is not None:
            self.on_phase(self.it.index, name, message)

    def timed(self, name: str, awaitable: Any) -> Any:
        return bounded(self.deadline, awaitable, f"the {name} phase of iteration {self.it.index}", Stop)

    def phase(self, name: str, result: PhaseResult) -> PhaseResult:
        self.it.phases.append({"phase": name, "ok": result.ok, "summary": result.summary})
        self.say(name, ("ok: " if result.ok else "failed: ") + result.summary)
        return result

    async def pause(self, name: str, payload: dict) -> Decision:
        return await self.gate(name, payload) if self.gate is not None else Decision()

    def ask(self, name: str, request: ModelRequest) -> Any:
        return self.timed(name, _ask(self.provider, request, self.state, self.it, self.recorder, self.budgets))

    def end(self, verdict: str, evidence: str) -> NoReturn:
        self.it.verdict, self.it.evidence = verdict, evidence
        raise _Ended()

    async def plan(self, instruction: str) -> None:
        """The plan (step mode: approve, or revise with the user's edited plan as the instruction)."""
        it = self.it
        self.say("plan", "planning")
        text = await self.ask("plan", planner.request(self.state, self.base, _history(self.state), instruction,
                                                      self.budgets.request_timeout_s))
        it.summary, it.plan = planner.parse(text)
        decision = await self.pause("plan", {"iteration": it.index, "plan": it.plan, "summary": it.summary})
        if decision.action == "stop":
            raise Stop(decision.why or "stopped by the user after the plan")
        if decision.action == "revise" and decision.text.strip():
            it.summary, it.plan = planner.parse(decision.text)
        self.phase("plan", PhaseResult(True, it.summary))

    async def implement(self) -> str:
        """The candidate (step mode: shown as a diff before it is applied; revise asks again)."""
        self.say("implement", "writing the candidate")
        extra = ""
        while True:
            text = await self.ask("implement", implementer.request(self.base, self.it.plan, extra,
                                                                   self.budgets.request_timeout_s))
            candidate = implementer.parse(text)
            if candidate is None:
                self.phase("implement", PhaseResult(False, "the reply holds no kernel source"))
                self.end("no candidate", "the implementer's reply held no Python source block")
            diff = implementer.diff(self.base, candidate, self.state.path)
            decision = await self.pause("implement", {"iteration": self.it.index, "diff": diff, "source": candidate})
            if decision.action == "stop":
                raise Stop(decision.why or "stopped by the user before applying the candidate")
            if decision.action != "revise":
                break
            extra = decision.text
        self.it.source = candidate
        self.phase("implement", PhaseResult(True, f"{len(candidate.splitlines())} lines"))
        return candidate

    async def compile_fix(self, candidate: str) -> tuple[str, CompileResult]:
        """Compile, with the fixer's rounds; returns the candidate that compiled and its result."""
        self.say("compile", "compiling")
        result = self.phase("compile", await self.timed("compile", self.evaluator.compile(candidate)))
        rounds = 0
        while not result.ok and rounds < self.budgets.fix_rounds and self.evaluator.fix is not None:
            rounds += 1
            self.say("compile", f"fixing (round {rounds})")
            fixed = await self.fix_round(candidate, result)
            if not fixed.ok or not fixed.source:
                break
            candidate = self.it.source = fixed.source
            result = self.phase("compile", await self.timed("compile", self.evaluator.compile(candidate)))
        # the phase's own typed result; a phase that gave none checked nothing (never "compiled")
        compiled = result.compile or (CompileResult.failed(result.summary, result.evidence) if not result.ok else
                                      CompileResult.not_checked(f"the compile phase gave no result ({result.summary})"))
        if compiled.ok is not True:
            self.it.result = Verdict(compiled, TestResult.not_verified(f"not tested: {compiled.status()}"))
            self.end(self.it.result.status(), result.evidence or compiled.evidence or result.summary)
        return candidate, compiled

    async def fix_round(self, candidate: str, result: PhaseResult) -> PhaseResult:
        """One fixer round; its model calls are recorded at this iteration and count in the token budget."""
        with at_step(self.it.index):
            fixed = await self.timed("compile", self.evaluator.fix(candidate, result))
        spent = fixed.data.get("usage")
        if isinstance(spent, Usage):
            self.state.usage = self.state.usage + spent
            self.it.tokens += spent.total_tokens
        self.say("compile", ("fixed: " if fixed.ok else "not fixed: ") + fixed.summary)
        return fixed

    async def test(self, candidate: str, compiled: CompileResult) -> None:
        """The frozen tests; a candidate that did not pass ends the iteration."""
        self.say("test", "testing against the frozen reference")
        result = self.phase("test", await self.timed("test", self.evaluator.test(candidate)))
        tested = result.test or (TestResult.wrong(result.evidence or result.summary) if not result.ok else
                                 TestResult.not_verified(f"not checked: the test phase gave no result ({result.summary})"))
        self.it.result = Verdict(compiled, tested, judged_by=result.judged_by)
        if not self.it.result.passed:
            self.end(self.it.result.status(), result.evidence or result.summary)

    async def autotune(self, candidate: str, compiled: CompileResult) -> str:
        """Autotune (optional): the tuned configuration is a new candidate, compiled for the chip and tested
        like any other; kept only when it passes both, else the untuned one stays."""
        if self.evaluator.tune is None:
            return candidate
        it, evaluator = self.it, self.evaluator
        self.say("autotune", "tuning")
        tuned = self.phase("autotune", await self.timed("autotune", evaluator.tune(candidate)))
        if not (tuned.ok and tuned.source and tuned.source != candidate):
            return candidate
        recompiled = await self.timed("autotune", evaluator.compile(tuned.source))
        check = await self.timed("autotune", evaluator.test(tuned.source)) if recompiled.ok else recompiled
        if not (recompiled.ok and check.ok):
            failed = "compile for the chip" if not recompiled.ok else "frozen tests"
            self.say("autotune", f"the tuned configuration failed the {failed}; kept the untuned one")
            return candidate
        it.source = tuned.source
        it.result = Verdict(recompiled.compile or compiled, check.test or it.result.test,
                            judged_by=JudgedBy.known(check.judged_by, it.result.judged_by))
        return tuned.source

    async def profile(self, candidate: str) -> None:
        """The measurement by the run's one method; the candidate is valid once timed."""
        it, state = self.it, self.state
        self.say("profile", f"measuring ({self.evaluator.method})")
        measured = self.phase("profile", await self.timed("profile", self.evaluator.measure(candidate)))
        it.profile = str(measured.data.get("profile") or "")
        if it.profile:
            self.say("profile", it.profile)
        if not measured.ok or measured.timing is None:  # a figure without its Timing is never read from a label
            self.end("not measured", measured.evidence or (
                measured.summary if not measured.ok else "the measure phase gave no Timing (where the figure came from)"))
        it.result = Verdict(it.result.compile, it.result.test, measured.timing,
                            judged_by=JudgedBy.known(measured.judged_by, it.result.judged_by))
        it.verdict = "valid"
        if state.baseline_s and measured.seconds >= state.baseline_s:
            it.evidence = f"correct but not faster: {measured.seconds:.3e} s vs baseline {state.baseline_s:.3e} s ({it.label})"
        await self.pause("profile", {"iteration": it.index, "time_s": it.time_s, "label": it.label})


async def iterate(state: RunState, provider: Provider, evaluator: Evaluator, budgets: Budgets = Budgets(), *,
                  recorder: Any = None, gate: Gate | None = None, on_phase: OnPhase | None = None,
                  instruction: str = "", deadline: Deadline | None = None) -> Iteration:
    """One iteration, built on the best candidate so far (else the original); appended to ``state.iterations``
    and returned. Failures are data (``verdict``). ``deadline``: the run's time budget, which cancels a phase
    that runs past it (``Stop``)."""
    it = Iteration(index=len(state.iterations) + 1)
    state.iterations.append(it)
    started = time.monotonic()
    steps = _Steps(state, provider, evaluator, budgets, it, recorder, gate, on_phase, deadline)
    try:
        await steps.plan(instruction)
        candidate = await steps.implement()
        candidate, compiled = await steps.compile_fix(candidate)
        await steps.test(candidate, compiled)
        candidate = await steps.autotune(candidate, compiled)
        await steps.profile(candidate)
    except _Ended:
        pass
    except ProviderError as err:  # the kind in words, with its HTTP status and Retry-After (rate limited ...)
        it.verdict, it.evidence = "model error", f"{err.describe()}: {err}"
    except Stop:
        it.verdict = "stopped"
        raise
    finally:
        it.seconds = time.monotonic() - started
        state.seconds += it.seconds
        if recorder is not None:
            recorder.snapshot(state, it)
    return it


async def propose_tests(state: RunState, provider: Provider, evaluator: Any, budgets: Budgets, missing: Any, *,
                        recorder: Any = None, on_round: Callable[[str], Any] | None = None) -> Any:
    """The test writer's validated proposal of the ``missing`` test definitions for the original file
    (agents/test_writer.py); its model calls are recorded as step 0 and count in the run's tokens."""
    from . import test_writer

    holder = Iteration(index=0)
    return await test_writer.propose(
        lambda request: _ask(provider, request, state, holder, recorder, budgets), state.path, state.original,
        lambda text: test_writer.validate_with(evaluator, state.original, text), missing=missing,
        rounds=budgets.test_rounds, timeout_s=budgets.request_timeout_s, on_round=on_round)


async def freeze_tests(state: RunState, provider: Provider, evaluator: Any, budgets: Budgets, *,
                       recorder: Any = None, gate: Gate | None = None, on_phase: OnPhase | None = None,
                       deadline: Deadline | None = None) -> None:
    """Before iteration 1, the tests are settled and frozen: the file's own, or the test writer's
    validated proposal (step mode: the gate's phase "tests", payload ``{"iteration": 0, "tests": text}``;
    revise = the user's text becomes the tests). Their hash goes in ``state.context``; a resumed run
    whose tests differ from the recorded ones is refused."""
    from . import test_writer

    say = on_phase or (lambda i, p, m: None)
    recorded = state.context.get("tests_hash")
    if recorded is not None:
        if state.context.get("tests") and not evaluator.tests:
            evaluator.use_tests(state.context["tests"])
        if evaluator.tests_hash() != recorded:
            raise Stop(f"refused: the frozen tests differ from those run {state.run_id} started with (hash "
                       f"{evaluator.tests_hash()} vs recorded {recorded}); restore them, or start a new run")
        return
    missing = () if evaluator.tests else test_writer.needs(state.original, state.path)
    if missing:
        say(0, "tests", f"the file lacks {' and '.join(missing)}: the test writer proposes them")
        proposal = await bounded(deadline, propose_tests(state, provider, evaluator, budgets, missing, recorder=recorder,
                                                         on_round=lambda m: say(0, "tests", m)), "the tests phase", Stop)
        if not proposal.ok:
            state.context["tests_refused"] = proposal.text
            raise Stop(f"no frozen tests: {proposal.summary}")
        text, summary = proposal.text, proposal.summary
        say(0, "tests", summary)
        for _ in range(3):
            decision = await gate("tests", {"iteration": 0, "tests": text, "summary": summary}) if gate else Decision()
            if decision.action == "stop":
                state.context["tests_refused"] = text
                raise Stop(decision.why or "stopped by the user at the tests")
            if decision.action != "revise" or not decision.text.strip():
                break
            text = decision.text  # the user's text is kept whatever the check says
            check = await bounded(deadline, test_writer.validate_with(evaluator, state.original, text),
                                  "the tests phase", Stop)
            if check.ok:
                summary = f"your tests, validated ({check.summary})"
                break
            summary = f"your tests were refused: {check.evidence or check.summary}"
            say(0, "tests", summary)
        else:
            state.context["tests_refused"] = text
            raise Stop(f"no frozen tests: {summary}")
        evaluator.use_tests(text)
        state.context["tests"], state.context["tests_summary"] = text, summary
    state.context["tests_hash"] = evaluator.tests_hash()


async def optimize(state: RunState, provider: Provider, evaluator: Evaluator, budgets: Budgets = Budgets(), *,
                   recorder: Any = None, gate: Gate | None = None, on_phase: OnPhase | None = None) -> RunState:
    """Up to ``budgets.iterations`` iterations (counting resumed ones); the best valid candidate wins.
    ``budgets.max_seconds`` bounds the whole run from here (the tests, the baseline, every phase; a
    resumed run has what its earlier iterations left): a phase running past it is cancelled."""
    state.method, state.stopped = evaluator.method, ""
    deadline = Deadline(max(0.0, budgets.max_seconds - state.seconds), budgets.seconds_name)
    if gate is not None:  # the time the user takes to answer is not spent from the budget
        gate = deadline.pausing(gate)
    try:
        if evaluator.frozen_tests is not None:
            await freeze_tests(state, provider, evaluator.frozen_tests, budgets, recorder=recorder, gate=gate, on_phase=on_phase,
                               deadline=deadline)
        if state.baseline is None:  # the baseline: the original, by the same method
            base = await deadline.within(evaluator.measure(state.original), "the baseline measurement", Stop)
            state.baseline = base.timing
            if base.data.get("profile"):
                state.context["baseline_profile"] = base.data["profile"]
            if recorder is not None:
                recorder.header(state)
        while len(state.iterations) < budgets.iterations:
            if state.seconds >= budgets.max_seconds:
                raise Stop(f"time budget spent ({state.seconds:.0f} s >= {budgets.max_seconds:g} s)")
            await iterate(state, provider, evaluator, budgets, recorder=recorder, gate=gate, on_phase=on_phase,
                          deadline=deadline)
        state.stopped = state.stopped or f"iteration budget reached ({budgets.iterations})"
    except Stop as stop:
        state.stopped = stop.reason
    finally:
        if recorder is not None:
            recorder.finish(state)
    return state


# ----------------------------------------------------------------------------- snapshots


def state_json(state: RunState) -> dict:
    data = asdict(state)
    data["usage"] = asdict(state.usage)
    data["baseline"] = state.baseline.to_json() if state.baseline else None
    for it, row in zip(state.iterations, data["iterations"]):
        row["result"] = it.result.to_json() if it.result else None
    data["table"] = state.table()
    return data


def state_from_json(data: dict) -> RunState:
    chip = (data.get("context") or {}).get("chip", "")
    iterations = [_iteration_from_json(it, data.get("method") or "", chip)
                  for it in data.get("iterations", []) if isinstance(it, dict)]
    usage = Usage(**{k: v for k, v in (data.get("usage") or {}).items() if k in Usage.__dataclass_fields__})
    fields = {k: data[k] for k in ("run_id", "path", "original", "method", "seconds", "stopped", "context")
              if k in data}
    baseline = Timing.from_json(data["baseline"]) if data.get("baseline") else None
    if baseline is None and data.get("baseline_s"):  # an older snapshot: the figure and its label
        label = data.get("baseline_label") or data.get("method") or ""
        baseline = timing_for(data["baseline_s"], label, chip)
    return RunState(**fields, baseline=baseline, iterations=iterations, usage=usage)


def _iteration_from_json(data: dict, method: str, chip: str) -> Iteration:
    """A snapshot's iteration; one of the older form (``valid``, ``time_s``, ``label`` beside the verdict, or
    no verdict at all) is read into its Verdict."""
    fields = {k: v for k, v in data.items() if k in Iteration.__dataclass_fields__}
    result = Verdict.from_json(data["result"]) if data.get("result") else None
    timing = timing_for(data.get("time_s"), data.get("label") or method, chip) if data.get("valid") else None
    if result is None and data.get("source") is not None and data.get("valid"):
        result = Verdict.of(True, True, timing)
    elif result is not None and result.timing is None and timing is not None:
        result = Verdict(result.compile, result.test, timing, judged_by=result.judged_by)
    return Iteration(**{**fields, "result": result})

"""`pallasite eval` as a service: a loop over tasks through the one verdict (analysis/verdict.py).

``EvalJob(tasks, methods, chip, ...)`` and ``run_eval(job, engine)``: a *method* only supplies
candidate source for a task (the folder's own file, a model's answer); every candidate gets the same
verdict as optimize and search give theirs:

- no candidate (the method has none, or its text is the task's reference unchanged): ``no
  candidate``, failed, 1.0x in the geomean: never compiled or correct;
- ``compiled``: the checker's TPU compiler tiers (0-2 by default) ran on the candidate for the chip
  (confined workers) with no error, and every kernel passed each tier (a tier skipped is not a pass);
- ``correct``: the ``time`` op's integrity checks passed (fresh inputs twice, NaN-filled outputs,
  inputs unchanged, the pallas_call reached the output and did not call the reference, a second shape):
  in TPU interpret mode on CPU at reduced shapes without a device, on the device with one.
  ``--no-verify`` leaves it "not verified", which never counts as correct;
- the speedup: ``analysis/verdict.speedup`` of the reference's timing over the candidate's. With a
  device both are device medians of one kind; without one both are estimates of one model for the
  chip (engine/estimates.py: the candidate and the task's reference through the same roofline);
  figures of two different models are refused, never divided.

A method is either a callable (task -> source) or an ``AgentRunner`` (agents/eval_agents.py: zero-shot,
auto, parallel, beam, evolve) that runs an agent through the task's ``Judge`` (engine/judge.py, built
with the run setup's check options: the project's settings): the same phases, memoized by candidate
text and shared by every method of the run, so the agent's candidates and the
final verdict of its answer come from the same compiles, tests and figures. ``EvalJob.done`` holds the
rows of tasks finished by an earlier run (resume), ``on_task`` receives each new row (the CLI stores
it), and ``task_budget`` stops after that many (method, task) pairs (``Incomplete``).

The CLI (server/commands/cmd_eval.py) and the benchmark only parse arguments and render the summaries.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..analysis.types import DEFAULT_CHIP
from ..analysis.verdict import COST_MODEL, CompileResult, TestResult, Timing, Verdict, try_speedup

from .eval_metrics import CaseOutcome, TaskOutcome, summarize

Method = Callable[[Any], Any]  # task -> candidate source (or an awaitable of it), None: no candidate
BASELINE = "the task's reference (XLA)"


@dataclass(frozen=True)
class MethodAnswer:
    """What an agent method (agents/eval_agents.py) answers for one task: the best candidate it found
    (``text`` None: it produced none), its plan, and what the agent spent (tokens, cost, calls,
    budgets used of their limits), recorded with the task's row so a resumed eval keeps them."""

    text: str | None
    plan: str = ""
    run_id: str = ""
    usage: dict = field(default_factory=dict)  # input/output/total tokens, calls, cost_usd (None: no price)
    budgets: dict = field(default_factory=dict)  # name -> {"used", "limit"}
    candidates: int = 0  # candidates the agent produced (each compiled, tested, measured)
    stopped: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "MethodAnswer":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


class AgentRunner:
    """A method that runs an agent per task through the task's ``Judge`` (engine/judge.py: the eval's own
    phases, so its candidates are scored exactly as ``--method files`` scores a file). Subclasses implement
    ``run``; ``label`` names the method's knobs in the summary."""

    label: str = ""

    def params(self) -> dict:
        return {}

    async def run(self, task: Any, judge: Any) -> MethodAnswer:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass
class EvalJob:
    tasks: list
    methods: dict[str, Method]
    chip: str = DEFAULT_CHIP
    jobs: int = 1
    verify: bool = True
    tiers: tuple[int, ...] = (0, 1, 2)
    timeout_s: float = 300.0
    memory_mb: int = 8192
    allow_unconfined: bool = False
    device: Any = None  # BackendSettings (the engine's device pool), an open device backend, or None: estimates
    options: Any = None  # the run setup's check options (the project's settings); None: the defaults for ``chip``
    run: Any = None  # agents/run_setup.RunSetup: every task's judge is its ``judge`` (its options, chip and limits);
    # None (a job built in code, tests): a judge of ``options`` and this job's own fields
    where: str = ""
    progress: Callable[[str], None] = field(default=lambda m: None)
    # resume: rows of tasks finished by an earlier run of the same eval, by (method, task); ``on_task``
    # is told each finished row (the CLI stores it in the results store as it comes)
    done: dict = field(default_factory=dict)
    on_task: Callable[[str, str, dict], None] | None = None
    task_budget: int | None = None  # at most this many (method, task) pairs evaluated now (then ``Incomplete``)


class Incomplete(RuntimeError):
    """``task_budget`` stopped the evaluation before every task was evaluated (the finished ones are stored)."""


@dataclass(frozen=True)
class TaskVerdict:
    task: str
    verdict: Verdict
    speedup: float | None = None
    refused: str | None = None  # why there is no speedup (analysis/verdict.try_speedup)
    reference: Timing | None = None

    answer: MethodAnswer | None = None  # an agent method's record (plan, source, usage, budgets)
    no_figure: str | None = None  # why the candidate or the reference has no figure (``no_figure``)

    def to_json(self) -> dict:
        return {"task": self.task, "verdict": self.verdict.to_json(), "speedup": self.speedup,
                "refused": self.refused, "reference": self.reference.to_json() if self.reference else None,
                "answer": self.answer.to_json() if self.answer else None, "no_figure": self.no_figure}

    @classmethod
    def from_json(cls, data: dict) -> "TaskVerdict":
        return cls(data["task"], Verdict.from_json(data["verdict"]), data.get("speedup"), data.get("refused"),
                   Timing.from_json(data["reference"]) if data.get("reference") else None,
                   MethodAnswer.from_json(data["answer"]) if data.get("answer") else None, data.get("no_figure"))

    def case(self) -> CaseOutcome:
        v = self.verdict
        untimed = v.timing is None or self.reference is None  # this task's own gap, not the method's
        return CaseOutcome(v, self.speedup, refused=self.refused if v.passed and not untimed else None,
                           untimed=(self.refused or self.no_figure) if v.passed and untimed else None,
                           reference=self.reference, no_figure=self.no_figure)

    @property
    def provenance(self) -> str:
        if not self.verdict.candidate:
            return "no candidate"
        return self.verdict.timing.label() if self.verdict.timing is not None else ""


def candidate_path(task: Any) -> str:
    return task.candidate_path or os.path.join(task.folder, "optimized.py")


def task_judge(engine: Any, options: Any, task: Any, job: EvalJob, device_slot: asyncio.Semaphore) -> Any:
    """The task's judge (engine/judge.py), shared by every method, the task's reference as the trusted side: the
    run setup's one judge (``RunSetup.judge``: the project's check options, chip and limits) where the job has a
    run setup, else one of ``options`` and the job's fields."""
    from ..engine.judge import Judge, Trusted

    how = {"device": job.device, "where": job.where, "verify": job.verify, "device_slot": device_slot}
    if job.run is not None:
        return job.run.judge(engine, Trusted.of_task(task), **how)
    return Judge(engine, options, Trusted.of_task(task), chip=job.chip, timeout_s=job.timeout_s, **how)


async def evaluate_one(judge: Any, task: Any, text: str | None) -> TaskVerdict:
    """One task's verdict by its judge (see the module docstring)."""
    if text is None or text == task.reference_text():
        why = "no candidate: the folder holds only the reference" if text is None else \
            "no candidate: the method's answer is the reference itself"
        return TaskVerdict(task.name, Verdict.no_candidate(why))
    verdict = await judge.verdict(text)
    if verdict.compile.ok is not True:  # a kernel tier 2 rejects for VMEM keeps its estimate, as a bound
        from ..engine.eval_tasks import vmem_bound

        verdict, ref = await vmem_bound(judge, verdict, text)
        return TaskVerdict(task.name, verdict, None, None, ref)
    timed = await judge.time(text)
    ref = timed.reference
    test = verdict.test
    s, refused = try_speedup(ref, verdict.timing, baseline_name=BASELINE) if test.outcome != "wrong" else (None, None)
    return TaskVerdict(task.name, verdict, s.value if s else None, refused, ref,
                       no_figure=no_figure(verdict.timing, ref, timed.why))


def no_figure(candidate: Any, reference: Any, why: str) -> str | None:
    """Why the candidate or the reference has no figure ("not estimated: <why>"), or None when both have one:
    every task's row says it, whatever its verdict (a task that was not verified keeps its reason too)."""
    if candidate is not None and reference is not None:
        return None
    side = "the candidate" if candidate is None else "the reference"
    why = (why or "").strip()
    if why.startswith(("not estimated", "not timed", "not ranked")):
        return why[:600]
    return f"not estimated ({side}): {why or 'no figure and no reason was reported'}"[:600]


def usage_total(answers: list) -> dict:
    """What the method spent over the tasks: tokens, model calls, cost (None when no price is set),
    the candidates it produced and the agents' wall time."""
    costs = [a.usage.get("cost_usd") for a in answers]
    return {"input_tokens": sum(a.usage.get("input_tokens", 0) for a in answers),
            "output_tokens": sum(a.usage.get("output_tokens", 0) for a in answers),
            "total_tokens": sum(a.usage.get("total_tokens", 0) for a in answers),
            "calls": sum(a.usage.get("calls", 0) for a in answers),
            "cost_usd": sum(c for c in costs if c is not None) if any(c is not None for c in costs) else None,
            "candidates": sum(a.candidates for a in answers), "agent_seconds": sum(a.seconds for a in answers),
            "tasks": len(answers)}


def _provenance(job: EvalJob, verdicts: list[TaskVerdict]) -> str:
    if job.device is not None:
        kinds = sorted({v.verdict.timing.label() for v in verdicts if v.verdict.timing is not None})
        return (", ".join(kinds) or f"device ({job.where})") + f" medians, candidate vs {BASELINE}"
    return f"estimate ({COST_MODEL}, {job.chip}): the candidate and the reference by the same model"


def _check_options(job: EvalJob) -> Any:
    """The run setup's check options (server/commands/cmd_eval.py passes them); defaults only where no project was read."""
    from ..engine.checker import CheckOptions

    return job.options or CheckOptions(target=job.chip, tiers=job.tiers, time_limit_s=job.timeout_s,
                                       memory_mb=job.memory_mb, allow_unconfined=job.allow_unconfined)


def _own_engine(job: EvalJob) -> Any:
    """An engine of the eval's own (closed when it ends): local workers, ``job.jobs`` of them, no store."""
    from ..engine.engine import Engine
    from ..engine.workers.pool import local_backend

    return Engine(checks=1, use_store=False,
                  backend_factory=lambda config, checks: local_backend(config, checks=checks, jobs=max(1, job.jobs)))


def _with_device(job: EvalJob, engine: Any) -> EvalJob:
    """The job with the engine's device pool for its device settings (engine/workers/device.py), if it names some."""
    from ..engine.workers.device import candidate_config
    from ..engine.workers.remote import BackendSettings
    from ..engine.workers.remote import where as device_where

    if not isinstance(job.device, BackendSettings):
        return job
    if engine.device_events is None:  # each worker's state (started, lost, a job re-queued) as progress
        engine.device_events = job.progress
    return dataclasses.replace(job, where=job.where or device_where(job.device), device=engine.device(
        job.device, candidate_config(job.memory_mb, job.timeout_s, allow_unconfined=job.allow_unconfined)))


@dataclass
class _Pairs:
    """The eval's (method, task) pairs as they run: one judge per task, the gate on tasks in flight, the
    device slots, the task budget, each method's count and time of its last task."""

    job: EvalJob
    engine: Any
    options: Any
    gate: asyncio.Semaphore
    device_slot: asyncio.Semaphore
    judges: dict = field(default_factory=dict)
    started: int = 0
    finished: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)

    async def one(self, name: str, method: Any, task: Any) -> TaskVerdict | None:
        """One pair's verdict (read back when an earlier run finished it); None when the budget left it."""
        job = self.job
        stored = job.done.get((name, task.name))
        if stored is not None:  # finished by an earlier run of this eval: read back, not re-run
            verdict = TaskVerdict.from_json(stored)
            self.counts[name] += 1
            job.progress(f"{name}: {self.counts[name]}/{len(job.tasks)} {task.name}: {verdict.verdict.status()} (resumed)")
            return verdict
        async with self.gate:
            if job.task_budget is not None and self.started >= job.task_budget:
                return None  # left for the next run
            self.started += 1
            verdict = await self.judged(method, task)
        self.counts[name] += 1
        self.finished[name] = time.monotonic()
        job.progress(f"{name}: {self.counts[name]}/{len(job.tasks)} {task.name}: {verdict.verdict.status()}")
        if job.on_task is not None:
            job.on_task(name, task.name, verdict.to_json())
        return verdict

    async def judged(self, method: Any, task: Any) -> TaskVerdict:
        """The method's candidate for the task, judged by the task's one judge; a failure is data."""
        # one judge per task for every method: the same reference, inputs and figures
        judge = self.judges.get(task.name) or self.judges.setdefault(
            task.name, task_judge(self.engine, self.options, task, self.job, self.device_slot))
        try:
            if isinstance(method, AgentRunner):
                answer = await method.run(task, judge)
                return dataclasses.replace(await evaluate_one(judge, task, answer.text), answer=answer)
            text = method(task)
            if inspect.isawaitable(text):  # a provider's answer
                text = await text
            return await evaluate_one(judge, task, text)
        except Exception as exc:  # noqa: BLE001 - one task's failure is data
            why = f"the evaluation failed: {type(exc).__name__}: {exc}"[:300]
            return TaskVerdict(task.name, Verdict(CompileResult.not_checked(why, chip=self.job.chip),
                                                  TestResult.not_verified(why)))


def _method_summary(job: EvalJob, name: str, method: Any, verdicts: list[TaskVerdict], wall_s: float) -> dict:
    """One method's summary (JSON): eval_metrics.summarize over its tasks, with each task's verdict, reference
    timing and agent record, and an agent method's label, parameters and usage."""
    outcomes = [TaskOutcome(v.task, (v.case(),), v.provenance) for v in verdicts]
    summary = summarize(name, outcomes, provenance=_provenance(job, verdicts), wall_s=wall_s).to_json()
    for row, v in zip(summary["per_task"], verdicts):
        row["verdict"] = v.verdict.to_json()
        row["reference_timing"] = v.reference.to_json() if v.reference else None
        if v.answer is not None:
            row["agent"] = v.answer.to_json()
    if isinstance(method, AgentRunner):
        summary["label"] = method.label or name
        summary["params"] = method.params()
        summary["agent_usage"] = usage_total([v.answer for v in verdicts if v.answer is not None])
    return summary


async def run_eval(job: EvalJob, engine: Any = None) -> list[dict]:
    """Each method over the tasks; one summary (JSON) per method, with each task's verdict."""
    options = _check_options(job)
    own = engine is None
    if own:
        engine = _own_engine(job)
    job = _with_device(job, engine)
    # as many device jobs at once as the pool has workers (1 for a single worker), and enough tasks in
    # flight to keep them busy; the verdicts do not depend on how many (each is its own device job)
    workers = int(getattr(job.device, "size", 1) or 1) if job.device is not None else 1
    runs = _Pairs(job, engine, options, asyncio.Semaphore(max(1, job.jobs, workers)), asyncio.Semaphore(workers),
                  counts={name: 0 for name in job.methods})
    out = []
    started = time.monotonic()
    try:
        # methods and tasks interleaved: every (method, task) pair is scheduled at once, in method-major
        # order, and waits for the gate (and its device jobs for a device worker)
        pairs = [(name, method, task) for name, method in job.methods.items() for task in job.tasks]
        results = await asyncio.gather(*(runs.one(*pair) for pair in pairs))
        for state in (job.device.states() if hasattr(job.device, "states") else ()):
            job.progress(f"device pool: {state.line()}")  # what each worker did
        by_method: dict[str, list] = {name: [] for name in job.methods}
        for (name, _, _), verdict in zip(pairs, results):
            by_method[name].append(verdict)
        for name, method in job.methods.items():
            verdicts = by_method[name]
            left = sum(v is None for v in verdicts)
            if left:
                raise Incomplete(f"--task-budget {job.task_budget} reached: method {name} has {left} of "
                                 f"{len(job.tasks)} tasks left")
            # interleaved: a method's wall time runs from the eval's start to its last task
            out.append(_method_summary(job, name, method, verdicts, runs.finished.get(name, started) - started))
    finally:
        if own:
            await engine.close()
    return out

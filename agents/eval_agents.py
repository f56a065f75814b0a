"""The agent methods of ``pallasite eval``: zero-shot, auto (the optimize loop), parallel/beam/evolve
(the graph search), run per task from the task's reference (JAXBench ``baseline.py``, MaxKernel's
reference) and scored exactly like ``--method files``.

- the agents judge their candidates with the task's ``Judge`` (engine/judge.py, through the loops'
  agents/optimize_eval.JudgeEvaluator): compile = the checker's tiers for the chip, test = the ``time``
  op's integrity checks against the task's reference (interpret mode on CPU, or the device), measure = the
  candidate's estimate by the one model that also prices the reference (or its device median). The
  phases are memoized by text, so the eval's final verdict of the winner reuses the agent's runs.
- ``AgentMethod(spec, providers, recorder, eval_id)``: an ``AgentRunner``; ``run(task, judge)`` runs:
  ``zero-shot``: ``samples`` independent implementer calls from the reference (no plan call), each
  candidate compiled, tested and measured; ``auto``: agents/optimize.optimize with ``iterations``;
  ``parallel|beam|evolve``: agents/search_job.run_search with the search's knobs. The best candidate
  (``best_of``: the fastest correct one, else a correct one, else a compiled one, else the first)
  is the task's answer; its source and plan, the tokens, calls, cost and budgets used go with the
  task's row (and so into the results store).

Every model call goes through a model client recorded under ``<eval id>/<method>/<task>`` (a
zero-shot sample under ``.../s<i>``, a search node under ``.../<node id>``), so
``--provider replay:<eval id>`` answers each run with its own recorded calls (``replay_source``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..analysis.verdict import COST_MODEL, rank

from .eval_job import AgentRunner, MethodAnswer, evaluate_one
from .optimize_eval import JudgeEvaluator
from .llm.providers import ProviderError, Usage

KINDS = ("zero-shot", "auto", "parallel", "beam", "evolve")
ZERO_SHOT_PLAN = (
    "Write this task as a Pallas TPU kernel.\n"
    "Keep the file's CONFIG, its input function and the entry function's name and signature; the entry must "
    "compute the same result through pl.pallas_call (BlockSpecs whose block shapes divide the inputs and fit "
    "the chip's VMEM), never by calling the original plain-JAX code.")


@dataclass(frozen=True)
class AgentSpec:
    """One agent method and its knobs (the search's in ``search``: agents/search.SearchOptions)."""

    kind: str
    samples: int = 10
    iterations: int = 5
    search: Any = None
    max_tokens: int = 500_000  # per task
    max_seconds: float = 1800.0  # per task
    request_timeout_s: float = 120.0
    concurrent_samples: int = 8  # zero-shot: samples asking the model at once (a rate limit's friend)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown agent method {self.kind!r}: choose one of {', '.join(KINDS)}")
        if self.kind in ("parallel", "beam", "evolve") and (self.search is None or self.search.algo != self.kind):
            raise ValueError(f"method {self.kind} needs search options with algo={self.kind}")
        for name in ("samples", "iterations", "max_tokens"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    def label(self) -> str:
        if self.kind == "zero-shot":
            return f"zero-shot best-of-{self.samples}"
        if self.kind == "auto":
            return f"auto, {self.iterations} iteration{'s' if self.iterations != 1 else ''}"
        o = self.search
        return {"parallel": f"parallel {o.trajectories}x{o.iterations}",
                "beam": f"beam width {o.width} depth {o.depth} branches {o.branches}",
                "evolve": f"evolve population {o.population} generations {o.generations}"}[self.kind] + \
            f" (at most {o.max_nodes} nodes)"

    def params(self) -> dict:
        common = {"max_tokens": self.max_tokens, "max_seconds": self.max_seconds}
        if self.kind == "zero-shot":
            return {"samples": self.samples, **common}
        if self.kind == "auto":
            return {"iterations": self.iterations, **common}
        return {"algo": self.search.algo, "seed": self.search.seed, **self.search.params(), **common}

    def calls_per_task(self) -> int:
        """Model calls at most per task (what a run costs): a sample is 1 call, an iteration or node 2."""
        if self.kind == "zero-shot":
            return self.samples
        if self.kind == "auto":
            return 2 * self.iterations
        return 2 * self.search.max_nodes


def eval_id(tasks: list, specs: dict[str, Any], provider: str, chip: str, timing: str, verify: bool,
            limits: tuple[Any, ...] = ()) -> str:
    """Same tasks (by their reference's and their own candidate's text: an edited optimized.py is judged
    again, not resumed), methods, provider, chip and timing, the same worker limits
    (``limits``: the memory limit) and the same cost model -> the same eval (a re-run resumes; rows a
    different cost model priced, or that ran out of a smaller memory limit, are never read back)."""
    digest = lambda text: hashlib.sha256(text.encode()).hexdigest()[:16]  # noqa: E731
    parts = [[(t.name, digest(t.reference_text()), digest(t.candidate_text())) for t in tasks],
             {name: (s.params() if isinstance(s, AgentSpec) else s) for name, s in specs.items()},
             provider, chip, timing, verify, "eval agents v1", COST_MODEL, *([list(limits)] if limits else [])]
    return "eval-" + hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


class Metered:
    """A provider that adds up what its replies used (and is never closed by the runs that share it)."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.name = getattr(provider, "name", "?")
        self.model = getattr(provider, "model", None)
        self.usage = Usage()

    @property
    def requests(self) -> list:
        return getattr(self.provider, "requests", [])

    async def complete(self, request: Any) -> Any:
        reply = await self.provider.complete(request)
        self.usage = self.usage + reply.usage
        return reply

    async def close(self) -> None:
        return None


@dataclass
class ProviderSource:
    """Where a task's model answers come from: ``for_task(task name)`` the provider (one shared by every
    task, or one per task in tests); with ``replay`` (the results store of a recorded eval) every run
    answers with its own recorded calls instead, found by the run id it was recorded under."""

    for_task: Callable[[str], Any]
    replay_store: str = ""
    replay_of: str = ""  # the recorded eval id

    def replayed(self, run_id: str) -> Any:
        from .llm.providers import ProviderConfig
        from .llm.providers_scripted import ReplayProvider

        recorded = self.replay_of + run_id[run_id.index("/"):]  # the same method/task/sample under the old eval
        try:
            return ReplayProvider(ProviderConfig(name=f"replay:{recorded}", store_path=self.replay_store))
        except ProviderError as err:
            return _Failing(err)


class _Failing:
    """A replay with nothing recorded for one run: each call fails with the reason (the run's failure is data)."""

    name = "replay"
    model = "replay"

    def __init__(self, err: ProviderError) -> None:
        self.err = err

    async def complete(self, request: Any) -> Any:
        raise self.err

    async def close(self) -> None:
        return None


def best_of(candidates: list[tuple[str, str, Any]]) -> tuple[str, str, Any] | None:
    """(source, plan, TaskVerdict) of the best candidate by the one ranking (analysis/verdict.rank, against
    the task's reference): fastest correct judged by the judge, else correct, else compiled, else the first
    produced; None when there is none."""
    if not candidates:
        return None
    ranking = rank(None, [(i, c[2].verdict) for i, c in enumerate(candidates)], baseline_name="the reference",
                   given={i: c[2].speedup for i, c in enumerate(candidates)})  # each against its task's reference
    return candidates[ranking.order[0]]


@dataclass
class AgentMethod(AgentRunner):
    spec: AgentSpec
    providers: ProviderSource
    eval_id: str
    method_name: str = ""
    recorder: Any = None  # agents/optimize_record.OptimizeRecorder (calls and runs in the results store)
    progress: Callable[[str], None] = field(default=lambda m: None)

    def __post_init__(self) -> None:
        self.label = self.spec.label()
        self.method_name = self.method_name or self.spec.kind

    def params(self) -> dict:
        return {**self.spec.params(), "calls_per_task_at_most": self.spec.calls_per_task()}

    def _provider(self, task: Any, run_id: str) -> Any:
        if self.providers.replay_of:
            return self.providers.replayed(run_id)
        return self.providers.for_task(task.name)

    async def run(self, task: Any, judge: Any) -> MethodAnswer:
        rid = f"{self.eval_id}/{self.method_name}/{task.name}"
        evaluator = JudgeEvaluator(judge, tune=False)  # the task's reference and inputs are the frozen tests
        started = time.monotonic()
        produced: list[tuple[str, str]] = []  # (source, plan) in the order the agent made them
        run = {"zero-shot": self._zero_shot, "auto": self._auto}.get(self.spec.kind, self._search)
        meters: list[Metered] = []
        stopped = ""
        try:
            stopped, budgets = await asyncio.wait_for(run(task, evaluator, rid, produced, meters),
                                                      self.spec.max_seconds)
        except asyncio.TimeoutError:
            stopped, budgets = f"time budget spent ({self.spec.max_seconds:g} s per task)", {}
        scored = []  # each candidate's verdict, within what is left of the same budget
        for src, plan in produced:
            left = self.spec.max_seconds - (time.monotonic() - started)
            try:
                if left <= 0:
                    raise asyncio.TimeoutError
                scored.append((src, plan, await asyncio.wait_for(evaluate_one(judge, task, src), left)))
            except asyncio.TimeoutError:
                unscored = len(produced) - len(scored)
                stopped = (stopped + "; " if stopped else "") + \
                    f"time budget spent ({self.spec.max_seconds:g} s per task) with {unscored} candidate(s) not scored"
                break
        seconds = time.monotonic() - started
        budgets = {**budgets, "seconds": {"used": round(seconds, 1), "limit": self.spec.max_seconds}}
        usage = sum((m.usage for m in meters), Usage())
        budgets["tokens"] = {"used": usage.total_tokens, "limit": self.spec.max_tokens}
        best = best_of(scored)
        return MethodAnswer(best[0] if best else None, best[1] if best else "", rid,
                            {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                             "total_tokens": usage.total_tokens, "calls": usage.calls, "cost_usd": usage.cost_usd},
                            budgets, len(produced), stopped, round(seconds, 3))

    async def _zero_shot(self, task: Any, evaluator: JudgeEvaluator, rid: str, produced: list, meters: list) -> tuple:
        from . import implementer
        from .llm.model_client import ModelClient, TokenBudget

        reference = task.reference_text()
        budget = TokenBudget(self.spec.max_tokens)
        at_once = asyncio.Semaphore(max(1, self.spec.concurrent_samples))

        async def sample(i: int) -> str | None:
            async with at_once:
                return await one_sample(i)

        async def one_sample(i: int) -> str | None:
            meter = Metered(self._provider(task, f"{rid}/s{i}"))
            meters.append(meter)
            client = ModelClient(meter, run_id=f"{rid}/s{i}", recorder=self.recorder, budget=budget)
            try:
                reply = await client.complete(implementer.request(reference, ZERO_SHOT_PLAN,
                                                                  timeout_s=self.spec.request_timeout_s))
            except ProviderError as err:
                return f"model error: {err}"
            source = implementer.parse(reply.text)
            if source is None:
                return "no candidate: the reply held no Python source block"
            produced.append((source, ZERO_SHOT_PLAN))
            self.progress(f"{task.name}: sample {i + 1}/{self.spec.samples} compiling")
            if (await evaluator.compile(source)).ok and (await evaluator.test(source)).ok:
                await evaluator.measure(source)
            return None

        errors = [e for e in await asyncio.gather(*(sample(i) for i in range(self.spec.samples))) if e]
        stopped = f"{self.spec.samples} samples asked" + (f"; {len(errors)} without a candidate ({errors[0][:120]})"
                                                          if errors else "")
        return stopped, {"samples": {"used": self.spec.samples, "limit": self.spec.samples}}

    async def _auto(self, task: Any, evaluator: JudgeEvaluator, rid: str, produced: list, meters: list) -> tuple:
        from .optimize import Budgets, new_run, optimize

        meter = Metered(self._provider(task, rid))
        meters.append(meter)
        state = new_run(task.reference_path, task.reference_text(), run_id=rid)
        state.context["chip"] = evaluator.chip
        budgets = Budgets(iterations=self.spec.iterations, max_tokens=self.spec.max_tokens,
                          max_seconds=self.spec.max_seconds, fix_rounds=0,
                          request_timeout_s=self.spec.request_timeout_s, seconds_name="--time-limit")
        say = lambda i, phase, message: self.progress(f"{task.name}: iteration {i} {phase}: {message}"[:160])  # noqa: E731
        state = await optimize(state, meter, evaluator, budgets, recorder=self.recorder, on_phase=say)
        produced.extend((it.source, it.plan) for it in state.iterations if it.source)
        return state.stopped, {"iterations": {"used": len(state.iterations), "limit": self.spec.iterations}}

    async def _search(self, task: Any, evaluator: JudgeEvaluator, rid: str, produced: list, meters: list) -> tuple:
        from .search_iterate import node_run_id
        from .search_job import run_search

        meter = Metered(self.providers.for_task(task.name) if not self.providers.replay_of else _Failing(
            ProviderError("refused", "replay: a search node without its own recording")))
        meters.append(meter)
        provider_for = None
        if self.providers.replay_of:
            def provider_for(node_id: str) -> Any:
                node_meter = Metered(self.providers.replayed(node_run_id(rid, node_id)))
                meters.append(node_meter)
                return node_meter
        say = lambda node, phase, message: self.progress(f"{task.name}: {node} {phase}: {message}"[:160])  # noqa: E731
        graph = await run_search(Path(task.reference_path), task.reference_text(), self.spec.search, meter,
                                 evaluator.judge, evaluator=evaluator, recorder=self.recorder, run_id=rid,
                                 provider_for=provider_for, on_phase=say,
                                 request_timeout_s=self.spec.request_timeout_s)
        nodes = [n for n in graph.nodes if n.op != "root"]
        produced.extend((n.source, n.plan) for n in nodes if n.source)
        return graph.stopped, {"nodes": {"used": len(nodes), "limit": self.spec.search.max_nodes}}

"""Search nodes as optimize iterations: the adapter between agents/search.py and agents/optimize.iterate.

``IterateNodes(provider, evaluator, ...)`` gives the search its two seams:

- ``attempt(req)``: one node is one ``iterate`` (plan -> implement -> compile-fix -> test ->
  autotune -> profile) on a fresh ``RunState`` whose original is the parent's source (so the loop
  starts from the parent), whose baseline is the root's time by the evaluator's one method, and
  whose instruction to the planner is the search step: the strategy to apply (mutation), or both
  parents' plans plus the second parent's code (crossover: the first parent's code is the source
  being improved). The ``Iteration`` is read back into the node: the candidate's source and plan,
  compiled (the last compile phase), correct (the frozen tests passed), the time and its label,
  the speedup ``speedup(root timing, node timing)`` (analysis/verdict.speedup), the loop's verdict and phases. Failures are data: a
  failed iteration is a failed node.
- ``evaluate_root(source)``: the root measured by the same method (its time is every node's
  baseline; the root itself is 1.0x).

Device work is serialised: ``Slotted`` wraps the evaluator so that, with a device backend, the
test, autotune and measure phases each hold one of the search's device slots (one timing at a time
on a TPU) while compiles (deviceless, on job workers) and the LLM calls of other nodes overlap.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..analysis.verdict import Timing, Verdict, try_speedup

from .llm.model_client import ModelClient
from .optimize import Budgets, RunState, iterate
from .search import Evaluation, Outcome, Proposal, ProposeRequest
from .search_graph import SearchNode

PLAN_CHARS = 2000  # how much of a parent's plan goes into the instruction


class Slotted:
    """An ``Evaluator`` (agents/evaluator.py) whose device phases wait for a slot (see the module
    docstring); the inner one's optional capabilities are passed on as they are (``tune`` slotted)."""

    def __init__(self, inner: Any, slots: asyncio.Semaphore, *, device: bool) -> None:
        self.inner, self.slots, self.device = inner, slots, device
        self.method = inner.method
        self.fix = inner.fix
        self.tune = (lambda source: self._held(inner.tune, source)) if inner.tune is not None else None
        self.frozen_tests = inner.frozen_tests

    async def _held(self, fn: Any, *args: Any) -> Any:
        if not self.device:
            return await fn(*args)
        async with self.slots:
            return await fn(*args)

    async def compile(self, source: str) -> Any:
        return await self.inner.compile(source)

    async def test(self, source: str) -> Any:
        return await self._held(self.inner.test, source)

    async def measure(self, source: str) -> Any:
        return await self._held(self.inner.measure, source)


def _speed(node: SearchNode) -> str:
    return f"{node.speedup:.2f}x the starting kernel ({node.provenance})" if node.speedup is not None else "not measured"


def instruction(req: ProposeRequest) -> str:
    """What the planner is told this search step is (the step's whole difference from a plain iteration)."""
    if req.op == "crossover":
        a, b = req.parents
        return (f"Search step {req.node_id} (crossover): the kernel above is parent A ({a.id}, {_speed(a)}); "
                f"parent B ({b.id}, {_speed(b)}) is below. Both pass the frozen tests. Plan ONE kernel that "
                f"combines what makes each of them fast.\n\nParent A's plan:\n{a.plan[:PLAN_CHARS]}\n\n"
                f"Parent B's plan:\n{b.plan[:PLAN_CHARS]}\n\nParent B's code:\n```python\n{b.source}\n```")
    p = req.parents[0]
    lines = [f"Search step {req.node_id}: improve this kernel (node {p.id}, {_speed(p)}) by applying the "
             f"strategy: {req.strategy}"]
    if p.op != "root" and p.plan:
        lines.append(f"The plan that produced it:\n{p.plan[:PLAN_CHARS]}")
    return "\n\n".join(lines)


def node_run_id(search_run: str, node_id: str) -> str:
    """The run id a node's model calls are recorded under (``replay:<it>`` replays that node)."""
    return f"{search_run}/{node_id}" if search_run else node_id


def replay_nodes(search_run: str, store_path: str) -> Any:
    """``provider_for`` replaying a recorded search: each node gets the calls recorded for it; a node the
    recorded search did not have gets a provider with no answers (the node fails as a model error)."""
    from .llm.providers import ProviderConfig, ProviderError
    from .llm.providers_scripted import ReplayProvider, ScriptedProvider

    def provider_for(node_id: str) -> Any:
        config = ProviderConfig(name=f"replay:{node_run_id(search_run, node_id)}", store_path=store_path)
        try:
            return ReplayProvider(config)
        except ProviderError:
            return ScriptedProvider(ProviderConfig(name=f"replay:{search_run} (no calls for {node_id})"), [])

    return provider_for


@dataclass
class IterateNodes:
    provider: Any
    evaluator: Any  # agents/optimize.Evaluator (compile, test, measure; fix/tune optional)
    path: str
    chip: str
    budgets: Budgets = field(default_factory=lambda: Budgets(iterations=1, fix_rounds=0))
    device: bool = False  # the evaluator's test/measure use a device: serialise them
    device_slots: int = 1
    root_timing: Timing | None = None  # the baseline (set by evaluate_root, or from a resumed root): what
    # ``speedup`` divides by
    # recording and replay: each node's model calls go through a model client (agents/llm/model_client.py)
    # recorded under ``node_run_id(run_id, node)``; ``provider_for(node_id)`` gives a node its own
    # provider (a replay of that node's calls), so concurrent nodes replay without mixing answers
    recorder: Any = None
    run_id: str = ""
    provider_for: Any = None
    on_phase: Any = None  # (node_id, phase, message)

    def __post_init__(self) -> None:
        self.slotted = Slotted(self.evaluator, asyncio.Semaphore(self.device_slots), device=self.device)

    async def evaluate_root(self, source: str) -> Evaluation:
        measured = await self.slotted.measure(source)  # only measured: neither compiled nor tested by the search
        if not measured.ok or measured.timing is None:
            return Evaluation(Verdict(), None, self.evaluator.method,
                              f"the starting kernel has no timing ({measured.summary}): "
                              f"{measured.evidence or 'no detail'}"[:500])
        self.root_timing = measured.timing
        return Evaluation(Verdict(timing=self.root_timing), 1.0, self.root_timing.label())

    def resume_from(self, nodes: list[SearchNode]) -> None:
        for n in nodes:
            if n.id == "root" and n.verdict.timing is not None:
                self.root_timing = n.verdict.timing

    async def attempt(self, req: ProposeRequest) -> Outcome:
        state = RunState(run_id=node_run_id(self.run_id, req.node_id), path=self.path, original=req.parents[0].source,
                         method=self.evaluator.method, baseline=self.root_timing, context={"chip": self.chip})
        say = None
        if self.on_phase is not None:
            say = lambda index, phase, message: self.on_phase(req.node_id, phase, message)  # noqa: E731
        provider = self.provider_for(req.node_id) if self.provider_for is not None else self.provider
        client = ModelClient(provider, run_id=state.run_id, recorder=self.recorder)
        it = await iterate(state, client, self.slotted, self.budgets, instruction=instruction(req), on_phase=say)
        record = dict(verdict=it.verdict, phases=tuple(it.phases), tokens=it.tokens)
        if it.source is None:  # the model gave no candidate (or the call failed): nothing to evaluate
            why = it.evidence if it.verdict == "no candidate" and it.evidence else f"{it.verdict}: {it.evidence}"
            return Outcome(Proposal("", it.plan, why[:500] or it.verdict), None, **record)
        proposal = Proposal(it.source, it.plan)
        verdict = state.verdict(it)  # as the phases made it: compiled, correct / wrong / not verified, timing
        method = verdict.timing.label() if verdict.timing is not None else self.evaluator.method
        if not it.valid:
            error = f"{it.verdict}: {it.evidence}"[:500] if it.evidence else it.verdict
            return Outcome(proposal, Evaluation(verdict, None, method, error), **record)
        s, refused = try_speedup(self.root_timing, verdict.timing, baseline_name="the starting kernel")
        if self.root_timing is None:
            refused = "no speedup: the starting kernel has no timing by this method"
        return Outcome(proposal, Evaluation(verdict, s.value if s else None, method, refused), **record)

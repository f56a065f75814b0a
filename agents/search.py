"""Graph search over optimize attempts: parallel trajectories, beam search, evolutionary search.

The search knows its seams and nothing else:

- ``attempt(ProposeRequest) -> Outcome``: one node, start to end. In pallasite this is one iteration
  of the optimize loop (agents/search_iterate.py: plan -> implement -> compile-fix -> test ->
  autotune -> profile, from the parent's source, with the strategy or both parents as the planner's
  instruction), its device work queued behind the search's device slots;
- or the two-step form ``propose(ProposeRequest) -> Proposal`` then ``evaluate(source) ->
  Evaluation`` (``two_step``), where only the evaluation takes a device slot;
- ``evaluate(source) -> Evaluation`` also measures the root (the starting kernel, the baseline).

A round's attempts run concurrently; device work goes through ``device_slots`` (1 by default: a TPU
runs one timing at a time while the LLM calls overlap). Every random choice comes
from one ``random.Random(seed)`` and is drawn before a round's concurrent work starts, and results
are added in schedule order, so the same seed and the same model answers give the same graph.
Finished nodes passed in ``done`` (read back from the results store) are reused instead of re-run:
an interrupted search resumes and ends with the graph an uninterrupted one would have.

Termination: ``max_nodes`` (the budget: attempts, root excluded), the algorithm's depth /
iterations / generations, or ``target`` (stop once a node reaches that speedup).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Sequence

from ..analysis.verdict import Verdict

from .search_graph import SearchGraph, SearchNode

ALGOS = ("parallel", "beam", "evolve")
DEFAULT_STRATEGIES = (
    "tile sizes: choose block shapes that fill the MXU and fit the scoped VMEM",
    "fuse: compute the whole expression inside one kernel, no intermediate in HBM",
    "pipeline: reorder the grid so the reduction axis is last and marked arbitrary",
    "accumulate in float32 VMEM scratch and write the output once",
    "reduce HBM traffic: reuse loaded blocks across grid steps",
    "use bfloat16 inputs to the MXU with float32 accumulation",
)


@dataclass(frozen=True)
class ProposeRequest:
    node_id: str
    op: str  # "optimize" | "mutate" | "crossover"
    parents: tuple[SearchNode, ...]
    strategy: str | None


@dataclass(frozen=True)
class Proposal:
    source: str
    plan: str = ""
    error: str | None = None  # the model gave nothing usable (the node is recorded as failed)


@dataclass(frozen=True)
class Evaluation:
    """One source evaluated: its ``Verdict`` as the phases made it (the only carrier of compiled /
    correct / not verified / timing; the root of an iterate search: its timing only), its speedup
    against the root by the run's method, the method, and why it failed or has no speedup."""

    verdict: Verdict
    speedup: float | None
    provenance: str
    error: str | None = None

    @property
    def compiled(self) -> bool | None:
        return self.verdict.compiled

    @property
    def correct(self) -> bool | None:
        return self.verdict.correct

    @property
    def seconds(self) -> float | None:
        """The measured (or estimated) time behind ``speedup``."""
        return self.verdict.timing.seconds if self.verdict.timing is not None else None


@dataclass(frozen=True)
class Outcome:
    """What one attempt produced: the proposal, its evaluation (None: nothing to evaluate), and the
    optimize iteration's record when the attempt was one (verdict, phases, tokens)."""

    proposal: Proposal
    evaluation: Evaluation | None
    verdict: str = ""
    phases: tuple[dict, ...] = ()
    tokens: int = 0


Propose = Callable[[ProposeRequest], Awaitable[Proposal]]
Evaluate = Callable[[str], Awaitable[Evaluation]]
Attempt = Callable[[ProposeRequest], Awaitable[Outcome]]


def two_step(propose: Propose, evaluate: Evaluate, slots: asyncio.Semaphore) -> Attempt:
    """An attempt from a proposer and an evaluator: the evaluation waits for a device slot."""

    async def attempt(req: ProposeRequest) -> Outcome:
        prop = await propose(req)
        if prop.error or not prop.source.strip():
            return Outcome(prop, None)
        async with slots:
            return Outcome(prop, await evaluate(prop.source))

    return attempt


@dataclass(frozen=True)
class SearchOptions:
    algo: str = "beam"
    seed: int = 0
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    max_nodes: int = 50  # budget: attempts (root excluded)
    target: float | None = None  # stop once the best speedup reaches this
    device_slots: int = 1  # evaluations at once (1: one timing at a time on the device)
    # parallel
    trajectories: int = 5
    iterations: int = 5
    # beam
    width: int = 3
    depth: int = 3
    branches: int = 2
    keep_factor: float = 1.0  # a child survives when speedup >= keep_factor x its parent's speedup
    # evolve
    population: int = 4
    generations: int = 3
    crossover_rate: float = 0.5

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise ValueError(f"unknown search algorithm {self.algo!r}: choose one of {', '.join(ALGOS)}")
        for name in ("max_nodes", "trajectories", "iterations", "width", "depth", "branches", "population",
                     "generations", "device_slots"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"search option {name} must be at least 1, got {getattr(self, name)}")
        if not self.strategies:
            raise ValueError("the search needs at least one strategy")
        if not 0.0 <= self.crossover_rate <= 1.0:
            raise ValueError(f"crossover_rate must be within [0, 1], got {self.crossover_rate}")

    def params(self) -> dict:
        common = {"max_nodes": self.max_nodes, "target": self.target}
        own = {"parallel": ("trajectories", "iterations"),
               "beam": ("width", "depth", "branches", "keep_factor"),
               "evolve": ("population", "generations", "crossover_rate")}[self.algo]
        return {**common, **{k: getattr(self, k) for k in own}}


class _Stop(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass
class _Run:
    options: SearchOptions
    attempt: Attempt
    graph: SearchGraph
    done: dict[str, SearchNode]
    on_node: Callable[[SearchNode], None] | None
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.options.seed)

    # ------------------------------------------------------------------ nodes

    def _remaining(self) -> int:
        return self.options.max_nodes - (len(self.graph.nodes) - 1)

    async def _attempt(self, spec: tuple) -> SearchNode:
        node_id, op, parents, strategy, trajectory = spec
        if node_id in self.done:
            return self.done[node_id]
        req = ProposeRequest(node_id, op, tuple(parents), strategy)
        try:
            out = await self.attempt(req)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a provider or evaluator failure is a failed node, not a crashed search
            out = Outcome(Proposal("", "", f"the attempt failed: {type(exc).__name__}: {exc}"), None)
        prop, ev = out.proposal, out.evaluation
        depth = max(p.depth for p in parents) + 1
        base = dict(id=node_id, parents=tuple(p.id for p in parents), depth=depth, op=op, strategy=strategy,
                    source=prop.source, plan=prop.plan, trajectory=trajectory, loop_word=out.verdict,
                    phases=tuple(out.phases), tokens=out.tokens)
        if ev is None:
            why = prop.error or "the proposal had no code"
            return SearchNode(**base, verdict=Verdict.no_candidate(why), speedup=None,
                              provenance=self.graph.provenance, error=why)
        speedup = ev.speedup if ev.verdict.passed else None
        return SearchNode(**base, verdict=ev.verdict, speedup=speedup, provenance=ev.provenance,
                          error=ev.error or prop.error)

    async def batch(self, specs: list[tuple]) -> list[SearchNode]:
        """Run a round's attempts concurrently (within the budget), add them in schedule order."""
        remaining = self._remaining()
        cut = specs[:max(0, remaining)]
        nodes = await asyncio.gather(*(self._attempt(s) for s in cut))
        for node in nodes:
            node = _with_order(node, len(self.graph.nodes))
            self.graph.add(node)
            if node.id not in self.done and self.on_node:
                self.on_node(node)
        if len(cut) < len(specs) or self._remaining() <= 0:
            raise _Stop("budget")
        target = self.options.target
        if target is not None and self.graph.best().ok and self.graph.best().speedup >= target:
            raise _Stop("target")
        return list(nodes)

    def strategy(self) -> str:
        return self.rng.choice(self.options.strategies)

    def strategies(self, n: int) -> list[str]:
        pool = self.options.strategies
        return self.rng.sample(pool, n) if n <= len(pool) else [self.rng.choice(pool) for _ in range(n)]

    # ------------------------------------------------------------------ algorithms

    async def parallel(self) -> str:
        """N independent trajectories; each iteration continues from the trajectory's best node so far."""
        o = self.options
        heads = [self.graph.root] * o.trajectories
        for it in range(1, o.iterations + 1):
            specs = [(f"t{t}.{it}", "optimize", (heads[t],), self.strategy(), t) for t in range(o.trajectories)]
            for t, node in enumerate(await self.batch(specs)):
                if node.ok and node.speedup >= (heads[t].speedup or 0.0):
                    heads[t] = node
        return "iterations"

    async def beam(self) -> str:
        """Width x depth, ``branches`` children per beam node with distinct strategies; children survive
        on ``speedup >= keep_factor x parent's speedup`` (the root at 1.0x); failed ones never do."""
        o = self.options
        frontier = [self.graph.root]
        for d in range(1, o.depth + 1):
            specs, parent_of = [], {}
            for b, parent in enumerate(frontier):
                for k, strat in enumerate(self.strategies(o.branches)):
                    node_id = f"b{d}.{b}.{k}"
                    parent_of[node_id] = parent
                    specs.append((node_id, "optimize", (parent,), strat, None))
            children = await self.batch(specs)
            kept = [c for c in children if c.ok and c.speedup >= o.keep_factor * (parent_of[c.id].speedup or 0.0)]
            if not kept:
                return "no_survivor"
            frontier = sorted(kept, key=lambda n: (-n.speedup, n.order))[:o.width]
        return "depth"

    async def evolve(self) -> str:
        """A population of correct nodes; each generation adds mutations (a tournament winner with a
        drawn strategy) and crossovers (two distinct parents' plans and code), then keeps the best."""
        o = self.options
        initial = [(f"g0.{i}", "mutate", (self.graph.root,), self.strategy(), None) for i in range(o.population)]
        population = _fittest(await self.batch(initial), o.population)
        for g in range(1, o.generations + 1):
            if not population:
                return "no_survivor"
            n_cross = round(o.population * o.crossover_rate) if len(population) >= 2 else 0
            specs = []
            for i in range(o.population):
                if i < n_cross:
                    a, b = self.rng.sample(population, 2)
                    specs.append((f"g{g}.{i}", "crossover", (a, b), None, None))
                else:
                    contenders = self.rng.sample(population, min(2, len(population)))
                    parent = max(contenders, key=lambda n: (n.speedup, -n.order))
                    specs.append((f"g{g}.{i}", "mutate", (parent,), self.strategy(), None))
            population = _fittest(population + await self.batch(specs), o.population)
        return "generations" if population else "no_survivor"


def _fittest(nodes: Sequence[SearchNode], n: int) -> list[SearchNode]:
    return sorted((x for x in nodes if x.ok), key=lambda x: (-x.speedup, x.order))[:n]


def _with_order(node: SearchNode, order: int) -> SearchNode:
    from dataclasses import replace

    return node if node.order == order else replace(node, order=order)


async def search(source: str, options: SearchOptions, propose: Propose | None, evaluate: Evaluate, *,
                 provenance: str, done: Sequence[SearchNode] = (),
                 on_node: Callable[[SearchNode], None] | None = None,
                 attempt: Attempt | None = None) -> SearchGraph:
    """Run one search from ``source`` (the root, measured by ``evaluate``). Nodes come from
    ``attempt`` when given (agents/search_iterate.py: optimize iterations), else from ``propose`` +
    ``evaluate``. ``provenance`` names where speedups come from ("estimate (v5e)", "device (TPU v5
    lite)"); ``done``: nodes of an interrupted run of the same search to reuse; ``on_node``: called
    with each new node as it is added (to persist it)."""
    if attempt is None:
        if propose is None:
            raise ValueError("search needs either attempt or propose")
        attempt = two_step(propose, evaluate, asyncio.Semaphore(options.device_slots))
    graph = SearchGraph(options.algo, options.seed, options.params(), provenance)
    finished = {n.id: n for n in done}
    if "root" in finished:
        root = finished["root"]
    else:
        ev = await evaluate(source)
        # the root is the baseline: 1.0x when it was timed; a root that could not be timed is recorded
        # as such (no speedup, its error), never as a correct 1.0x
        root = SearchNode("root", (), 0, "root", None, source, "the starting kernel", ev.verdict,
                          ev.speedup if ev.correct is not False else None,
                          ev.provenance, ev.error)
    graph.add(root)
    if "root" not in finished and on_node:
        on_node(root)
    run = _Run(options, attempt, graph, finished, on_node)
    try:
        graph.stopped = await getattr(run, options.algo)()
    except _Stop as stop:
        graph.stopped = stop.why
    return graph

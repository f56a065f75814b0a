"""Search nodes as optimize iterations (agents/search_iterate.py), on the scripted landscape.

The "model" answers the planner and the implementer as a pure function of what they are sent (the
parent's BLOCK_ROWS in the kernel shown, the strategy or crossover in the instruction), so the same
seed gives the same graph. The evaluator judges by BLOCK_ROWS: 3 fails to compile, 5 fails the
tests, 7 passes but has no timing; otherwise its time is 1 / LANDSCAPE[rows] (the root, 8 rows, 1 s).
The device evaluator runs over tests/fake_backend.py with scripted device medians.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from pallasite.agents.evaluator import BaseEvaluator
from pallasite.analysis.verdict import COST_MODEL, CompileResult, TestResult, Timing, Verdict
from pallasite.agents.optimize import PhaseResult
from pallasite.agents.prompts.planner_prompt import SYSTEM as PLANNER_SYSTEM
from pallasite.agents.llm.providers import ProviderError, Usage
from pallasite.agents.search import SearchOptions, search
from pallasite.agents.search_graph import SearchNode
from pallasite.agents.search_iterate import IterateNodes, Slotted, instruction

ROOT = (Path(__file__).parent / "data" / "search" / "add_reference.py").read_text()
STRATS = ("double", "halve", "break", "same")
LANDSCAPE = {8: 1.0, 16: 1.3, 32: 1.6, 64: 2.0, 128: 2.5, 256: 1.5, 4: 0.6, 2: 0.4, 1: 0.3, 512: 1.2, 1024: 0.9}


def rows(src: str) -> int:
    return int(re.search(r"BLOCK_ROWS = (\d+)", src).group(1))


def with_rows(n: int) -> str:
    return re.sub(r"BLOCK_ROWS = \d+", f"BLOCK_ROWS = {n}", ROOT)


class Reply:
    def __init__(self, text):
        self.text, self.usage, self.seconds = text, Usage(10, 10, 0, 1, 0.0), 0.0


class LandscapeModel:
    """Planner: reads the kernel's rows and the instruction, answers "rows A -> B". Implementer:
    writes the kernel with B rows. ``delay``: seconds per call (to make calls overlap)."""

    def __init__(self, delay: float = 0.0, fail_node: str | None = None):
        self.requests, self.delay, self.fail_node = [], delay, fail_node
        self.active = self.max_active = 0

    async def complete(self, request):
        self.requests.append(request)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.active -= 1
        if request.system == PLANNER_SYSTEM:
            if self.fail_node and f"Search step {self.fail_node}" in request.prompt:
                raise ProviderError("rate_limited", "429 too many requests")
            n = rows(request.prompt)
            if "(crossover)" in request.prompt:
                other = rows(request.prompt.split("Parent B's code:")[1])
                new = max(n, other) * 2 if n != other else n
                return Reply(f"Crossover of {n} and {other} rows -> {new}\nUse the bigger block of the two, doubled.")
            strategy = re.search(r"by applying the strategy: (\w+)", request.prompt).group(1)
            new = {"double": n * 2, "halve": max(1, n // 2), "break": 3, "same": n}[strategy]
            return Reply(f"{strategy}: rows {n} -> {new}\nChange BLOCK_ROWS.")
        new = int(re.search(r"-> (\d+)", request.prompt).group(1))
        return Reply(f"```python\n{with_rows(new)}```")

    async def close(self):
        pass


class LandscapeEvaluator(BaseEvaluator):
    method = "estimate (v6e)"

    def __init__(self):
        self.measured, self.active, self.max_active = [], 0, 0

    async def compile(self, source):  # typed results, as the Judge gives (a bare ok is "not checked")
        if rows(source) == 3:
            evidence = "block rows 3 is not a multiple of 8"
            return PhaseResult(False, "error", evidence=evidence,
                               compile=CompileResult.failed(evidence, chip="v6e", tiers=(0, 1, 2)))
        return PhaseResult(True, "compiles", compile=CompileResult.passed("v6e"))

    async def _device(self, result):
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        await asyncio.sleep(0.005)
        self.active -= 1
        return result

    async def test(self, source):
        if rows(source) == 5:
            return await self._device(PhaseResult(False, "mismatch", evidence="max abs error 2.0",
                                                  test=TestResult.wrong("max abs error 2.0")))
        return await self._device(PhaseResult(True, "matches", test=TestResult.ok("the landscape stand-in"), judged_by="the judge"))

    async def measure(self, source):
        self.measured.append(rows(source))
        n = rows(source)
        if n == 7:
            return await self._device(PhaseResult(False, "not estimated", evidence="no pallas_call was traced"))
        seconds = 1.0 / LANDSCAPE.get(n, 0.5)
        timing = Timing(seconds, "estimate", "v6e", COST_MODEL)
        return await self._device(PhaseResult(True, "estimated", timing=timing))


def run(options, model=None, evaluator=None, *, device=False, done=(), on_node=None):
    model = model or LandscapeModel()
    evaluator = evaluator or LandscapeEvaluator()
    nodes = IterateNodes(model, evaluator, "add.py", "v6e", device=device)
    nodes.resume_from(list(done))
    graph = asyncio.run(search(ROOT, options, None, nodes.evaluate_root, provenance=evaluator.method,
                               attempt=nodes.attempt, done=done, on_node=on_node))
    return graph, model, evaluator


def test_each_node_is_one_optimize_iteration_from_its_parent():
    opts = SearchOptions(algo="beam", width=2, depth=2, branches=3, keep_factor=1.0, strategies=STRATS, seed=3)
    g, model, ev = run(opts)
    assert g.root.speedup == 1.0 and g.root.time_s == pytest.approx(1.0)
    # the root was only measured: never compiled or tested by the search, so it does not claim either
    assert g.root.compiled is None and g.root.correct is None and g.root.status == "root"
    for n in g.nodes[1:]:
        parent = g.node(n.parents[0])
        # plan -> implement -> compile [-> test -> profile], recorded on the node
        names = [p["phase"] for p in n.phases]
        assert names[:3] == ["plan", "implement", "compile"]
        if n.status == "not compiled":
            assert n.loop_word == "not compiled" and rows(n.source) == 3 and "multiple of 8" in n.error
            assert n.speedup is None
        else:
            assert names[3:] == ["test", "profile"] and n.loop_word == "valid"
            assert n.speedup == pytest.approx(LANDSCAPE[rows(n.source)])  # root time / node time
            assert n.provenance == f"estimate ({COST_MODEL}, v6e)" and n.time_s == pytest.approx(1 / LANDSCAPE[rows(n.source)])
        # the planner saw the parent's source and the strategy as the instruction
        plan_req = next(r for r in model.requests if f"Search step {n.id}:" in r.prompt)
        assert f"BLOCK_ROWS = {rows(parent.source)}" in plan_req.prompt
        assert f"by applying the strategy: {n.strategy}" in plan_req.prompt
        assert n.plan.startswith(n.strategy)
    # failing candidates were never measured, and no failed node was expanded
    assert 3 not in ev.measured
    failed = {n.id for n in g.nodes if n.status == "not compiled"}
    assert failed and not any(set(n.parents) & failed for n in g.nodes)


def test_crossover_gives_the_planner_both_parents_plans_and_code():
    opts = SearchOptions(algo="evolve", population=4, generations=2, crossover_rate=0.5,
                         strategies=("double", "halve"), seed=5)
    g, model, _ = run(opts)
    cross = [n for n in g.nodes if n.op == "crossover"]
    assert cross
    for c in cross:
        a, b = (g.node(p) for p in c.parents)
        req = next(r for r in model.requests if f"Search step {c.id} (crossover)" in r.prompt)
        assert a.plan in req.prompt and b.plan in req.prompt
        assert req.prompt.split("## Kernel")[1].count(f"BLOCK_ROWS = {rows(a.source)}") >= 1  # A is the kernel improved
        assert f"```python\n{b.source}\n```" in req.prompt  # B's code rides in the instruction
        ra, rb = rows(a.source), rows(b.source)
        assert rows(c.source) == (max(ra, rb) * 2 if ra != rb else ra)


def test_same_seed_same_graph_and_resume_gives_the_same_graph():
    opts = SearchOptions(algo="beam", width=2, depth=3, branches=2, strategies=STRATS, seed=11)
    full, _, _ = run(opts)
    again, _, _ = run(opts)
    assert full.signature() == again.signature()
    saved = []

    class Interrupt(Exception):
        pass

    def persist(node):
        saved.append(node.to_json())
        if len(saved) == 3:
            raise Interrupt()

    with pytest.raises(Interrupt):
        run(opts, on_node=persist)
    model = LandscapeModel()
    resumed, _, ev = run(opts, model, done=[SearchNode.from_json(d) for d in saved])
    assert resumed.signature() == full.signature()
    assert [n.verdict for n in resumed.nodes] == [n.verdict for n in full.nodes]
    assert [n.loop_word for n in resumed.nodes] == [n.loop_word for n in full.nodes]
    # the stored root's time was reused (the root not measured again), finished nodes were not re-run
    saved_ids = {d["id"] for d in saved}
    assert "root" in saved_ids
    assert len(ev.measured) == sum(1 for n in resumed.nodes if n.id not in saved_ids
                                   and any(p["phase"] == "profile" for p in n.phases))
    asked = {m.group(1) for r in model.requests for m in [re.search(r"Search step (\S+?)[: ]", r.prompt)] if m}
    assert not asked & {d["id"] for d in saved}


def test_failures_are_nodes_model_error_untested_and_unmeasured():
    # 'halve' from 8 -> 4, then 'halve' again: scripted so one node is a model error
    opts = SearchOptions(algo="parallel", trajectories=2, iterations=1, strategies=("double",), seed=0)
    g, _, _ = run(opts, LandscapeModel(fail_node="t0.1"))
    bad, good = g.node("t0.1"), g.node("t1.1")
    assert bad.status == "no candidate" and bad.loop_word == "model error" and "429" in bad.error
    assert good.ok and good.speedup == pytest.approx(1.3)

    class Odd(LandscapeEvaluator):  # every candidate gets 5 rows (wrong) or 7 rows (no timing)
        def __init__(self, n):
            super().__init__()
            self.n = n

        async def test(self, source):
            return await super().test(with_rows(self.n) if source != ROOT else source)

        async def measure(self, source):
            return await super().measure(with_rows(self.n) if source != ROOT else source)

    g, _, _ = run(opts, evaluator=Odd(5))
    assert all(n.status == "compiled, wrong" and n.loop_word == "compiled, wrong" for n in g.nodes[1:])
    g, _, _ = run(opts, evaluator=Odd(7))
    node = g.node("t0.1")
    assert node.status == "compiled, correct" and node.loop_word == "not measured" and node.speedup is None
    assert node.speed_text().startswith("not timed")
    assert g.best().id == "root"  # a node without a timing never ranks


def test_a_root_without_timing_gives_no_speedups_never_one_x():
    class NoRoot(LandscapeEvaluator):
        async def measure(self, source):
            if source == ROOT:
                return PhaseResult(False, "not estimated", evidence="the cost model failed")
            return await super().measure(source)

    g, _, _ = run(SearchOptions(algo="parallel", trajectories=1, iterations=1, strategies=("double",)),
                  evaluator=NoRoot())
    assert g.root.time_s is None and "no timing" in g.root.error
    node = g.node("t0.1")
    assert node.correct and node.speedup is None and "starting kernel has no timing" in node.error


def test_device_phases_take_one_slot_while_model_calls_overlap():
    model, ev = LandscapeModel(delay=0.02), LandscapeEvaluator()
    run(SearchOptions(algo="parallel", trajectories=4, iterations=1, strategies=("double",)), model, ev, device=True)
    assert model.max_active == 4 and ev.max_active == 1
    # without a device (estimates on job workers) nothing is serialised
    model, ev = LandscapeModel(delay=0.02), LandscapeEvaluator()
    run(SearchOptions(algo="parallel", trajectories=4, iterations=1, strategies=("double",)), model, ev)
    assert ev.max_active > 1


def test_slotted_offers_tune_and_fix_only_when_the_evaluator_has_them():
    plain = Slotted(LandscapeEvaluator(), asyncio.Semaphore(1), device=True)
    assert plain.tune is None and plain.fix is None and plain.frozen_tests is None  # explicit, never probed

    class Tuning(LandscapeEvaluator):
        async def tune(self, source):
            return PhaseResult(True, "tuned", source=source)

    tuned = Slotted(Tuning(), asyncio.Semaphore(1), device=True)
    assert asyncio.run(tuned.tune(ROOT)).summary == "tuned"


def test_instruction_names_the_step_the_parent_and_its_speed():
    root = SearchNode("root", (), 0, "root", None, ROOT, "the starting kernel", Verdict(), 1.0, "estimate (v6e)")
    from pallasite.agents.search import ProposeRequest

    text = instruction(ProposeRequest("b1.0.1", "optimize", (root,), "fuse everything"))
    assert "Search step b1.0.1" in text and "fuse everything" in text and "1.00x the starting kernel" in text


def test_replay_of_a_search_reproduces_the_graph(tmp_path):
    """Issue 23: every node's model calls are recorded (under the search's run id and the node's id),
    and a replay gives each node its own recorded answers: the same graph, concurrency or not."""
    from pallasite.agents.optimize_record import OptimizeRecorder
    from pallasite.agents.search_iterate import replay_nodes
    from pallasite.knowledge.store import store_path

    opts = SearchOptions(algo="evolve", population=3, generations=2, crossover_rate=0.5, strategies=STRATS, seed=5)
    rec = OptimizeRecorder(tmp_path)
    model = LandscapeModel(delay=0.002)
    nodes = IterateNodes(model, LandscapeEvaluator(), "add.py", "v6e", recorder=rec, run_id="search-abc")
    first = asyncio.run(search(ROOT, opts, None, nodes.evaluate_root, provenance="estimate (v6e)", attempt=nodes.attempt))
    rec.close()
    assert len(model.requests) >= 2 * (len(first.nodes) - 1)

    class NoModel:  # the replay must not ask a live model
        async def complete(self, request):
            raise AssertionError("a replayed search asked the model")

    again = IterateNodes(NoModel(), LandscapeEvaluator(), "add.py", "v6e",
                         provider_for=replay_nodes("search-abc", str(store_path(tmp_path))))
    second = asyncio.run(search(ROOT, opts, None, again.evaluate_root, provenance="estimate (v6e)",
                                attempt=again.attempt))
    assert second.signature() == first.signature()
    assert [(n.id, n.plan, n.speedup) for n in second.nodes] == [(n.id, n.plan, n.speedup) for n in first.nodes]

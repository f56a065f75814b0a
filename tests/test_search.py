"""Graph search on a scripted landscape: a scripted 'model' and a fake timing backend.

The landscape: a candidate's source is the reference with ``BLOCK_ROWS = N``; the fake evaluator
gives it a speedup that is a pure function of N (and fails N == 3, which is not a multiple of 8).
The scripted proposer turns (parent, strategy) into a new N deterministically, so each algorithm's
expected graph can be written down by hand.
"""

import asyncio
import re
from pathlib import Path

import pytest

from pallasite.agents.search import Evaluation, Proposal, SearchOptions, search
from pallasite.agents.search_graph import SearchGraph
from pallasite.analysis.verdict import Verdict

ROOT = (Path(__file__).parent / "data" / "search" / "add_reference.py").read_text()
STRATS = ("double", "halve", "break", "same")
# speedup by block rows (the fake device's landscape); 3 does not compile
LANDSCAPE = {8: 1.0, 16: 1.3, 32: 1.7, 64: 2.2, 128: 2.0, 256: 1.5, 4: 0.6, 2: 0.4, 512: 1.2, 1024: 0.9}


def rows(src: str) -> int:
    return int(re.search(r"BLOCK_ROWS = (\d+)", src).group(1))


def with_rows(n: int) -> str:
    return re.sub(r"BLOCK_ROWS = \d+", f"BLOCK_ROWS = {n}", ROOT)


class Landscape:
    def __init__(self):
        self.proposals = []
        self.evaluations = []

    async def propose(self, req):
        self.proposals.append(req)
        await asyncio.sleep(0)
        if req.op == "crossover":
            a, b = (rows(p.source) for p in req.parents)
            return Proposal(with_rows(max(a, b) * 2 if a != b else a), f"crossover of {a} and {b}")
        n = rows(req.parents[0].source)
        new = {"double": n * 2, "halve": max(1, n // 2), "break": 3, "same": n}[req.strategy]
        return Proposal(with_rows(new), f"{req.strategy}: {n} -> {new}")

    async def evaluate(self, src):
        self.evaluations.append(src)
        n = rows(src)
        if n == 3:
            return Evaluation(Verdict.of(False, None, evidence="block rows 3 is not a multiple of 8"), None,
                              "device (fake TPU)", "block rows 3 is not a multiple of 8")
        return Evaluation(Verdict.of(True, True, judged_by="the judge"), LANDSCAPE.get(n, 0.5), "device (fake TPU)")


def run(options, land=None, **kw):
    land = land or Landscape()
    g = asyncio.run(search(ROOT, options, land.propose, land.evaluate, provenance="device (fake TPU)", **kw))
    return g, land


def test_parallel_runs_n_independent_trajectories():
    g, land = run(SearchOptions(algo="parallel", trajectories=3, iterations=2, strategies=STRATS, seed=1))
    assert len(g.nodes) == 1 + 3 * 2
    for t in range(3):
        first, second = g.node(f"t{t}.1"), g.node(f"t{t}.2")
        assert first.parents == ("root",) and first.trajectory == t
        # the second step continues from the first when it was at least as fast, else from the root
        expected_parent = first.id if first.ok and first.speedup >= 1.0 else "root"
        assert second.parents == (expected_parent,)
    assert g.stopped == "iterations"
    assert g.root.speedup == 1.0


def test_beam_prunes_by_keep_factor_and_never_keeps_failed_nodes():
    opts = SearchOptions(algo="beam", width=2, depth=3, branches=3, keep_factor=1.2, strategies=STRATS, seed=3)
    g, _ = run(opts)
    by_depth = {}
    for n in g.nodes[1:]:
        by_depth.setdefault(n.depth, []).append(n)
    assert len(by_depth[1]) == 3  # one beam node (the root) x 3 branches
    # the depth-2 parents are exactly the kept depth-1 children: ok, >= 1.2 x parent, best 2 of them
    kept1 = sorted([c for c in by_depth[1] if c.ok and c.speedup >= 1.2 * 1.0], key=lambda c: (-c.speedup, c.order))[:2]
    parents2 = {n.parents[0] for n in by_depth.get(2, [])}
    assert parents2 == {c.id for c in kept1}
    for n in g.nodes[1:]:
        for p in n.parents:
            parent = g.node(p)
            assert parent.op == "root" or parent.ok, "a failed node was expanded"
            if parent.op != "root":
                assert parent.speedup >= 1.2 * g.node(parent.parents[0]).speedup
    # the 'break' strategy produced failed nodes, and none of them has children
    failed = {n.id for n in g.nodes if n.status == "not compiled"}
    assert failed, "the landscape should have produced a failed node with these seeds"
    assert not any(set(n.parents) & failed for n in g.nodes)


def test_beam_root_is_reference_at_one_and_keep_gate_uses_it():
    # with keep_factor 1.0 a child equal to the root (strategy 'same') survives; a slower one does not
    opts = SearchOptions(algo="beam", width=4, depth=1, branches=4, keep_factor=1.0, strategies=STRATS, seed=0)
    g, _ = run(opts)
    assert g.root.speedup == 1.0
    kids = {n.strategy: n for n in g.nodes[1:]}
    assert kids["double"].speedup == pytest.approx(1.3)
    assert kids["halve"].speedup == pytest.approx(0.6)
    assert kids["break"].status == "not compiled"
    assert g.best().strategy == "double"


def test_beam_stops_without_survivors():
    opts = SearchOptions(algo="beam", width=2, depth=3, branches=2, keep_factor=1.0, strategies=("halve", "break"))
    g, _ = run(opts)
    assert g.stopped == "no_survivor" and len(g.nodes) == 3


def test_evolution_produces_crossover_children():
    opts = SearchOptions(algo="evolve", population=4, generations=2, crossover_rate=0.5, strategies=STRATS, seed=5)
    g, land = run(opts)
    cross = [n for n in g.nodes if n.op == "crossover"]
    assert cross, "no crossover child"
    for c in cross:
        assert len(c.parents) == 2 and c.parents[0] != c.parents[1]
        assert all(g.node(p).ok for p in c.parents)
    assert any(r.op == "crossover" and len(r.parents) == 2 for r in land.proposals)


def test_budget_and_target_stop_the_search():
    g, _ = run(SearchOptions(algo="parallel", trajectories=3, iterations=5, max_nodes=4, strategies=STRATS))
    assert g.stopped == "budget" and len(g.nodes) == 1 + 4
    g, _ = run(SearchOptions(algo="parallel", trajectories=1, iterations=9, target=2.0, strategies=("double",)))
    assert g.stopped == "target" and g.best().speedup >= 2.0
    assert [rows(n.source) for n in g.nodes] == [8, 16, 32, 64]


def test_same_seed_same_graph_and_different_seed_differs():
    opts = SearchOptions(algo="beam", width=2, depth=3, branches=2, keep_factor=1.0, strategies=STRATS, seed=11)
    a, _ = run(opts)
    b, _ = run(opts)
    assert a.signature() == b.signature()
    others = [run(SearchOptions(**{**opts.__dict__, "seed": s}))[0].signature() for s in (12, 13, 14)]
    assert any(o != a.signature() for o in others)


@pytest.mark.parametrize("algo", ["parallel", "beam", "evolve"])
def test_interrupted_search_resumes_to_the_same_graph(algo):
    opts = SearchOptions(algo=algo, seed=7, strategies=STRATS, trajectories=2, iterations=3, width=2, depth=3,
                         branches=2, population=3, generations=2)
    full, _ = run(opts)
    saved = []

    class Interrupt(Exception):
        pass

    def persist(node):
        saved.append(node.to_json())
        if len(saved) == 4:
            raise Interrupt()

    with pytest.raises(Interrupt):
        run(opts, on_node=persist)
    assert len(saved) == 4
    land = Landscape()
    from pallasite.agents.search_graph import SearchNode
    resumed, _ = run(opts, land, done=[SearchNode.from_json(d) for d in saved])
    assert resumed.signature() == full.signature()
    # the nodes read back were not proposed again
    assert not {r.node_id for r in land.proposals} & {d["id"] for d in saved}


def test_failed_proposal_is_a_failed_node_not_a_crash():
    land = Landscape()

    async def flaky(req):
        if req.node_id == "t0.1":
            raise RuntimeError("rate limited")
        return await land.propose(req)

    g = asyncio.run(search(ROOT, SearchOptions(algo="parallel", trajectories=2, iterations=1, strategies=("double",)),
                           flaky, land.evaluate, provenance="device (fake TPU)"))
    assert g.node("t0.1").status == "no candidate" and "rate limited" in g.node("t0.1").error
    assert g.node("t1.1").ok


def test_one_timing_at_a_time_while_proposals_overlap():
    state = {"props": 0, "max_props": 0, "evals": 0, "max_evals": 0}
    land = Landscape()

    async def propose(req):
        state["props"] += 1
        state["max_props"] = max(state["max_props"], state["props"])
        await asyncio.sleep(0.01)
        state["props"] -= 1
        return await land.propose(req)

    async def evaluate(src):
        state["evals"] += 1
        state["max_evals"] = max(state["max_evals"], state["evals"])
        await asyncio.sleep(0.01)
        state["evals"] -= 1
        return await land.evaluate(src)

    asyncio.run(search(ROOT, SearchOptions(algo="parallel", trajectories=4, iterations=1, strategies=STRATS),
                       propose, evaluate, provenance="device (fake TPU)"))
    assert state["max_props"] == 4 and state["max_evals"] == 1


def test_graph_round_trips_through_json():
    g, _ = run(SearchOptions(algo="evolve", population=3, generations=1, strategies=STRATS, seed=2))
    back = SearchGraph.from_json(g.to_json())
    assert back.signature() == g.signature() and back.best_path() == g.best_path()
    assert g.best_path()[0] == "root" and g.best_path()[-1] == g.best().id


def test_bad_options_say_what_to_do():
    with pytest.raises(ValueError, match="choose one of parallel, beam, evolve"):
        SearchOptions(algo="random")
    with pytest.raises(ValueError, match="width must be at least 1"):
        SearchOptions(width=0)


def test_a_root_that_could_not_be_timed_is_not_stored_as_correct_one_x():
    """Issue 23: the starting kernel without a timing keeps its failure; nothing is divided by it."""
    land = Landscape()

    async def evaluate(src):
        if src == ROOT:
            return Evaluation(Verdict(), None, "device (fake TPU)", "the starting kernel has no timing")
        return await land.evaluate(src)

    g = asyncio.run(search(ROOT, SearchOptions(algo="parallel", trajectories=2, iterations=2, strategies=STRATS),
                           land.propose, evaluate, provenance="device (fake TPU)"))
    assert g.root.correct is None and g.root.speedup is None and g.root.error == "the starting kernel has no timing"
    assert not g.root.ok

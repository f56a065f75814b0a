"""`pallasite search` as a service: one search of a file, each node one optimize iteration.

``run_search(path, text, options, provider, judge, ...)`` builds the loop's evaluator over the run's
one judge (engine/judge.py: estimates on job workers, or the frozen tests and timings on the device),
the node adapter
(agents/search_iterate.IterateNodes: every node's model calls through a model client, recorded under
``<run id>/<node id>``; ``provider_for`` replays them) and runs agents/search.search. The CLI
(server/commands/cmd_search.py) and the editor (server/editor/search_lsp.py) only parse arguments, render the graph
and write the reports.
"""

from __future__ import annotations

from pathlib import Path


async def run_search(path: Path, text: str, options, provider, judge, *, done=(), on_node=None, on_phase=None,
                     request_timeout_s: float = 120.0, recorder=None, run_id: str = "", provider_for=None,
                     evaluator=None):
    """One search of ``text`` (the file at ``path``); each node one optimize iteration by ``provider``
    (agents/search_iterate.py), judged by ``judge`` (engine/judge.py, built once by the run setup: its
    check options, chip, device and trusted side). Without a device the frozen tests run in interpret mode
    on job workers and times are the cost model's estimates for the chip; with one tests and timings run
    there, a round's evaluations on as many workers as the pool has (the graph does not depend on how
    many: results are added in schedule order). Shared by the CLI and the editor's "Search for a faster
    kernel"; the benchmarks and eval's search methods call it too. ``evaluator``: the loop's evaluator
    over ``judge`` when the caller has one (eval's agents); the judge's engine is the caller's to close."""
    from .optimize import Budgets
    from .optimize_eval import JudgeEvaluator
    from .search import search
    from .search_iterate import IterateNodes

    engine = judge.engine
    listener = engine.device_events  # restored after the run (a server's engine outlives it)
    device = None
    if judge.device is not None:
        if on_phase is not None:  # each worker's state, as this run's progress
            engine.device_events = lambda line: on_phase("pool", "device", line)
        device = judge.device_backend()
    # a round's evaluations run on as many device workers as the pool has (its size; 1 for one worker)
    slots = max(options.device_slots, int(getattr(device, "size", 1) or 1)) if device is not None else \
        options.device_slots
    # the device phases have no autotune yet (run `pallasite tune --backend ...` on the best node)
    evaluator = evaluator or JudgeEvaluator(judge, tune=device is None, device_profile=False)
    nodes = IterateNodes(provider, evaluator, str(path), judge.chip, Budgets(iterations=1, fix_rounds=0,
                                                                             request_timeout_s=request_timeout_s),
                         device=device is not None, device_slots=slots, on_phase=on_phase,
                         recorder=recorder, run_id=run_id, provider_for=provider_for)
    nodes.resume_from(list(done))
    try:
        graph = await search(text, options, None, nodes.evaluate_root, provenance=evaluator.method, done=done,
                             on_node=on_node, attempt=nodes.attempt)
    finally:
        engine.device_events = listener
        await provider.close()
    if graph.root.time_s and graph.root.provenance:
        graph.provenance = graph.root.provenance  # names the device kind once the root was timed
    return graph

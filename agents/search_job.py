"""`pallasite search` as a service: one search of a file, each node one optimize iteration.

``run_search(path, text, options, provider, ...)`` builds the evaluator (estimates on job workers,
or the frozen tests and timings on an open device backend), the node adapter
(agents/search_iterate.IterateNodes: every node's model calls through a model client, recorded under
``<run id>/<node id>``; ``provider_for`` replays them) and runs agents/search.search. The CLI
(server/cmd_search.py) and the editor (server/search_lsp.py) only parse arguments, render the graph
and write the reports.
"""

from __future__ import annotations

from pathlib import Path


async def run_search(path: Path, text: str, options, provider, *, chip: str, jobs: int = 2, memory_mb: int = 8192,
                     done=(), on_node=None, engine=None, check_options=None, device=None, where: str = "",
                     on_phase=None, request_timeout_s: float = 120.0, timeout_s: float = 600.0,
                     allow_unconfined: bool = False, recorder=None, run_id: str = "", provider_for=None,
                     evaluator=None):
    """One search of ``text`` (the file at ``path``); each node one optimize iteration by ``provider``
    (agents/search_iterate.py). Without ``device`` the frozen tests run in interpret mode on job
    workers and times are the cost model's estimates for ``chip``; with ``device`` (``BackendSettings``:
    the engine's device pool for them, engine/device.py; or an open backend, a fake one in tests;
    ``where`` names it) tests and timings run there, a round's evaluations on as many workers as the
    pool has (the graph does not depend on how many: results are added in schedule order). ``engine``: the server's (else one is made and closed here). Shared by the CLI and
    the editor's "Search for a faster kernel"; the benchmarks call it too. ``evaluator``: another
    Evaluator for the nodes (``pallasite eval``'s agents/eval_agents.TaskEvaluator: a JAXBench or
    MaxKernel task's own phases); ``device`` then only says whether its test and measure queue."""
    from .optimize import Budgets
    from .optimize_eval import EngineEvaluator
    from .search import search
    from .search_device import DeviceEvaluator
    from .search_iterate import IterateNodes
    from ..engine.checker import CheckOptions
    from ..engine.device import candidate_config
    from ..engine.engine import Engine
    from ..engine.pool import local_backend
    from ..engine.remote import BackendSettings
    from ..engine.remote import where as device_where

    own = engine is None
    if own:
        engine = Engine(use_store=False, backend_factory=lambda config, checks: local_backend(
            config, checks=checks, jobs=max(1, jobs)))
    options_ = check_options or CheckOptions(target=chip, tiers=(0, 1, 2), memory_mb=memory_mb, time_limit_s=timeout_s,
                                             allow_unconfined=allow_unconfined)
    listener = engine.device_events  # restored after the run (a server's engine outlives it)
    if isinstance(device, BackendSettings):  # the engine's device pool for these settings (engine/device.py)
        where = where or device_where(device)
        if on_phase is not None:  # each worker's state, as this run's progress
            engine.device_events = lambda line: on_phase("pool", "device", line)
        device = engine.device(device, candidate_config(memory_mb, timeout_s, allow_unconfined=allow_unconfined))
    # a round's evaluations run on as many device workers as the pool has (its size; 1 for one worker)
    slots = max(options.device_slots, int(getattr(device, "size", 1) or 1)) if device is not None else \
        options.device_slots
    if evaluator is not None:
        pass
    elif device is not None:
        evaluator = DeviceEvaluator(engine, str(path), text, options_, chip=chip, device=device, where=where or "device",
                                    timeout_s=timeout_s)
    else:
        evaluator = EngineEvaluator(engine, str(path), text, options_, chip=chip, timeout_s=timeout_s)
    nodes = IterateNodes(provider, evaluator, str(path), chip, Budgets(iterations=1, fix_rounds=0,
                                                                       request_timeout_s=request_timeout_s),
                         device=device is not None, device_slots=slots, on_phase=on_phase,
                         recorder=recorder, run_id=run_id, provider_for=provider_for)
    nodes.resume_from(list(done))
    try:
        graph = await search(text, options, None, nodes.evaluate_root, provenance=evaluator.method, done=done,
                             on_node=on_node, attempt=nodes.attempt)
    finally:
        engine.device_events = listener
        if own:
            await engine.close()
        await provider.close()
    if graph.root.time_s and graph.root.provenance:
        graph.provenance = graph.root.provenance  # names the device kind once the root was timed
    return graph

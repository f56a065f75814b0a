"""`pallasite search FILE --algo parallel|beam|evolve`: search for a faster kernel.

Each node is one optimize attempt by the LLM provider (``--provider``), evaluated in a worker:
traced and estimated by the cost model for ``--target`` against the file's reference() (XLA's cost
of it), and checked in TPU interpret mode against reference(). Without a device every speedup is
labelled an estimate for the chip; no CPU timing becomes a speedup. Every node is stored in the
results store (``.pallasite/results.sqlite``, agent steps of the search's run id) as it finishes;
running the same command again resumes the search where it stopped (same file, options, seed and
provider give the same run id). Writes the graph as JSON and a self-contained HTML report under
``.pallasite/search/`` (or ``--report``); ``--apply`` writes the best node's source into the file.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from pallasite.agents.search import SearchOptions

    d = SearchOptions()
    parser.add_argument("path", help="a kernel file with example_inputs() and reference()")
    parser.add_argument("--algo", choices=("parallel", "beam", "evolve"), default="beam")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=d.max_nodes, help="at most this many attempts (nodes)")
    parser.add_argument("--target-speedup", type=float, help="stop once a node reaches this speedup")
    parser.add_argument("--trajectories", type=int, default=d.trajectories, help="parallel: independent trajectories")
    parser.add_argument("--iterations", type=int, default=d.iterations, help="parallel: steps per trajectory")
    parser.add_argument("--width", type=int, default=d.width, help="beam: nodes kept per depth")
    parser.add_argument("--depth", type=int, default=d.depth, help="beam: levels")
    parser.add_argument("--branches", type=int, default=d.branches, help="beam: children per beam node")
    parser.add_argument("--keep-factor", type=float, default=d.keep_factor,
                        help="beam: a child survives when speedup >= this x its parent's speedup")
    parser.add_argument("--population", type=int, default=d.population, help="evolve: population size")
    parser.add_argument("--generations", type=int, default=d.generations, help="evolve: generations")
    parser.add_argument("--crossover-rate", type=float, default=d.crossover_rate,
                        help="evolve: share of each generation's children made by crossover")
    parser.add_argument("--target", default="v6e", help="the chip whose cost model estimates speedups")
    parser.add_argument("--provider", help="gemini, openai, scripted (default: agent.provider setting)")
    parser.add_argument("--model")
    parser.add_argument("--base-url")
    parser.add_argument("--scripted-file", metavar="JSON", help="scripted provider: a JSON list of replies")
    parser.add_argument("--jobs", type=int, default=2, help="job workers evaluating nodes")
    parser.add_argument("--memory-mb", type=int, default=8192)
    parser.add_argument("--report", help="where to write the HTML report")
    parser.add_argument("--apply", action="store_true", help="write the best node's source into the file")


def run_id(text: str, options: object, provider: str, chip: str) -> str:
    key = json.dumps([text, options.algo, options.seed, options.params(), list(options.strategies), provider, chip])
    return "search-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def run(args: argparse.Namespace) -> int:
    from pallasite.agents.providers import ProviderConfig, ProviderError, make_provider
    from pallasite.agents.search import SearchOptions
    from pallasite.agents.search_graph import SearchNode
    from pallasite.knowledge.store import ResultsStore
    from pallasite.engine.store_cache import workspace_for

    path = Path(args.path)
    if not path.is_file():
        print(f"pallasite search: {path}: no such file", file=sys.stderr)
        return 2
    text = path.read_text(encoding="utf-8")
    try:
        options = SearchOptions(algo=args.algo, seed=args.seed, max_nodes=args.budget, target=args.target_speedup,
                                trajectories=args.trajectories, iterations=args.iterations, width=args.width,
                                depth=args.depth, branches=args.branches, keep_factor=args.keep_factor,
                                population=args.population, generations=args.generations,
                                crossover_rate=args.crossover_rate)
    except ValueError as exc:
        print(f"pallasite search: {exc}", file=sys.stderr)
        return 2
    name = args.provider or ""
    try:
        provider = make_provider(ProviderConfig(name=name, model=args.model or "", base_url=args.base_url or "",
                                                scripted_file=args.scripted_file or ""))
    except ProviderError as exc:
        print(f"pallasite search: {exc}", file=sys.stderr)
        return 2
    workspace = workspace_for([str(path.resolve())])
    store = ResultsStore.open(workspace) if workspace else None
    rid = run_id(text, options, name, args.target)
    done = stored_nodes(store, rid)
    if done:
        print(f"pallasite search: resuming {rid}: {len(done)} nodes already done", file=sys.stderr)

    def on_node(node: SearchNode) -> None:
        if store:
            store.put_agent_step(rid, node.order, "search_node", node.to_json())
        speed = f"{node.speedup:.2f}x" if node.speedup is not None else "-"
        print(f"  {node.id:10s} {node.status:9s} {speed:>7s}  {node.strategy or node.op}"[:110], file=sys.stderr)

    try:
        graph = asyncio.run(run_search(path, text, options, provider, chip=args.target, jobs=args.jobs,
                                       memory_mb=args.memory_mb, done=done, on_node=on_node))
    finally:
        if store:
            store.close()
    best = graph.best()
    report = write_outputs(graph, rid, Path(workspace or path.parent) / ".pallasite" / "search",
                           f"pallasite search {path.name} ({args.algo})", Path(args.report) if args.report else None)
    speed = f"{best.speedup:.2f}x" if best.speedup is not None else "-"
    print(f"best: {best.id} {speed} against reference() [{best.provenance}]; {len(graph.nodes)} nodes; "
          f"stopped: {graph.stopped}; run {rid}")
    print(f"report: {report}")
    if args.apply and best.op != "root":
        path.write_text(best.source, encoding="utf-8")
        print(f"wrote {best.id}'s source into {path}")
    return 0


async def run_search(path: Path, text: str, options, provider, *, chip: str, jobs: int = 2, memory_mb: int = 8192,
                     done=(), on_node=None, backend=None):
    """One search of ``text`` (the file at ``path``): nodes proposed by ``provider`` and evaluated in
    workers (estimate for ``chip`` + interpret-mode check against reference()). Shared by the CLI and
    the editor's "Search for a faster kernel"."""
    from pallasite.agents.search import Evaluation, search
    from pallasite.agents.search_propose import provider_proposer
    from pallasite.engine.client import WorkerConfig
    from pallasite.engine.eval_tasks import EvalTask, estimate_candidate
    from pallasite.engine.pool import local_backend

    own = backend is None
    backend = backend or local_backend(WorkerConfig(timeout_s=600.0, memory_mb=memory_mb), checks=0, jobs=max(1, jobs))
    task = EvalTask(path.stem, str(path.parent), "file", str(path), str(path))

    async def evaluate(source: str) -> Evaluation:
        r = await estimate_candidate(backend, task, source, chip, identical_is_reference=False)
        return Evaluation(r.compiled, r.correct, r.speedup, r.provenance, r.error)

    try:
        return await search(text, options, provider_proposer(provider, chip), evaluate,
                            provenance=f"estimate ({chip})", done=done, on_node=on_node)
    finally:
        if own:
            await backend.close()
        await provider.close()


def stored_nodes(store, rid: str) -> list:
    from pallasite.agents.search_graph import SearchNode

    return [SearchNode.from_json(s.payload) for s in store.agent_steps(rid) if s.kind == "search_node"] if store else []


def write_outputs(graph, rid: str, out_dir: Path, title: str, report: Path | None = None) -> Path:
    """The graph as JSON and the HTML report; returns the report's path."""
    from pallasite.server.report_html import search_html

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{rid}.json").write_text(graph.dumps())
    report = report or out_dir / f"{rid}.html"
    report.write_text(search_html(graph.to_json(), title=title))
    return report

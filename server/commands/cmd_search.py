"""`pallasite search FILE --algo parallel|beam|evolve`: search for a faster kernel.

Each node is one iteration of the optimize loop (agents/search_iterate.py: plan -> implement ->
compile -> test -> autotune -> profile) by the LLM provider (``--provider``), started from its
parent's source with the search step (a strategy, or a crossover of two parents) as the planner's
instruction. ``--backend estimate`` (default): the frozen tests run in TPU interpret mode in local
workers and times are the cost model's estimates for ``--target``, labelled so; ``--backend
local|ssh|ray``: tests and timings run on that device worker, one timing at a time, and speedups are
device medians labelled with the device kind (a worker that answers CPU timings ranks nothing).
Speedups are against the root (the starting file) timed the same way. Every node is stored in the
results store (``.pallasite/results.sqlite``, agent steps of the search's run id) as it finishes;
running the same command again resumes the search where it stopped (same file, options, seed and
provider give the same run id). Every node's model calls are recorded under ``<run id>/<node id>``;
``--provider replay:<run id>`` re-runs the search with each node's recorded answers (the same graph).
Writes the graph as JSON and a self-contained HTML report under
``.pallasite/search/`` (or ``--report``); ``--apply`` writes the best node's source into the file.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from pathlib import Path
from typing import Any

from .console import progress_stream


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from . import flags

    parser.add_argument("path", help="a kernel file with example_inputs() and reference()")
    parser.add_argument("--algo", choices=("parallel", "beam", "evolve"), default="beam",
                        help="the search: parallel trajectories, a beam, or evolution (default beam)")
    flags.add(parser, "--seed", command)
    flags.add(parser, "--max-nodes", command, dest="budget")
    parser.add_argument("--target-speedup", type=float, help="stop once a node reaches this speedup")
    flags.add(parser, "--max-iterations", command, dest="iterations")
    flags.add_search_knobs(parser)
    flags.add(parser, "--target", command)
    flags.add_model(parser, command, api_key_env=False)
    flags.add_rate_limits(parser, command)
    flags.add(parser, "--jobs", command)
    flags.add_backend(parser, command)
    flags.add(parser, "--memory-mb", command)
    flags.add(parser, "--report", command)
    flags.add(parser, "--apply", command)


def run(args: argparse.Namespace) -> int:
    """Set the run up from the arguments, search, then render the best node, the report and --apply."""
    from ...agents.llm.providers import ProviderError

    try:
        setup = _setup(args)
    except (ValueError, ProviderError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    graph, rid = _search(args, setup)
    return _render(args, setup, graph, rid)


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What a search starts from: the file (bytes and text), the options, the run's setup, the model."""

    path: Path
    started: bytes
    text: str
    options: Any
    run: Any  # agents/run_setup.RunSetup: chip, check options, device, provider, workspace
    provider: Any
    provider_for: Any


def _setup(args: argparse.Namespace) -> _Setup:
    """The run's inputs; ValueError or ProviderError says what is wrong (before any model is asked)."""
    from ...agents.run_setup import prepare
    from ...agents.search import SearchOptions

    from ..run_request import refuse_non_kernel, run_request

    path = Path(args.path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    refuse_non_kernel(path, "search")  # before any model call
    run = prepare(run_request(args, str(path), memory_mb=args.memory_mb))  # the project's settings, flags over them
    started = path.read_bytes()  # --apply writes over the file only if it is still these bytes
    options = SearchOptions(algo=args.algo, seed=args.seed, max_nodes=args.budget, target=args.target_speedup,
                            trajectories=args.trajectories, iterations=args.iterations, width=args.width,
                            depth=args.depth, branches=args.branches, keep_factor=args.keep_factor,
                            population=args.population, generations=args.generations,
                            crossover_rate=args.crossover_rate)
    provider, provider_for = _provider(args, run)
    return _Setup(path, started, started.decode("utf-8"), options, run, provider, provider_for)


def _provider(args: argparse.Namespace, run: Any):
    """The model, and for a replay each node's own recorded calls (agents/search_iterate.py)."""
    from ...agents.llm.providers import ProviderConfig, ProviderError

    name = run.provider
    if not name.startswith("replay:"):
        from ..run_request import command_line_provider, provider_config

        return command_line_provider(provider_config(args, run), "search"), None
    from ...agents.llm.providers_scripted import ScriptedProvider
    from ...agents.run_setup import stored_nodes_exist
    from ...agents.search_iterate import replay_nodes
    from ...knowledge.store import store_path

    recorded = name.split(":", 1)[1].strip()
    if not store_path(run.workspace).exists() or not stored_nodes_exist(run.workspace, recorded):
        raise ProviderError("config", f"replay:{recorded}: no recorded search of that run id in "
                                      f"{store_path(run.workspace)} (the search prints its run id at the end)")
    return ScriptedProvider(ProviderConfig(name=name), []), replay_nodes(recorded, str(store_path(run.workspace)))


def _search(args: argparse.Namespace, setup: _Setup):
    """The search (agents/search_job.run_search), resumed from the stored nodes of its run id, each node
    stored and told as it finishes; returns the graph and the run id."""
    from ...agents.run_setup import search_run_id, stored_nodes

    run = setup.run
    store = run.open_store()
    rid = search_run_id(setup.text, setup.options, run.provider, run.chip, run.where())
    done = stored_nodes(store, rid)
    if done:
        print(f"pallasite search: resuming {rid}: {len(done)} nodes already done", file=sys.stderr)
    recorder = run.recorder()  # every node's model calls, under "<run id>/<node id>"

    def on_node(node: Any) -> None:
        if store:
            store.put_agent_step(rid, node.order, "search_node", node.to_json())
        print(f"  {node_line(node)}  {changed(node)}"[:160], file=sys.stderr)
        why = node.verdict.why() if node.op != "root" and not node.verdict.passed else ""
        if why:  # "no candidate", "not compiled", ...: the row says why on the line below
            print(f"  {'':10s} why: {' '.join(why.split())}"[:240], file=sys.stderr)

    shown = progress_stream()  # a node's phases as they run: progress, on a terminal only (server/commands/console.py)

    def on_phase(node_id: str, phase: str, message: str) -> None:
        if shown is not None:
            print(f"    {node_id} {phase}: {message}"[:110], file=shown, flush=True)

    print(f"  {NODE_HEAD}", file=sys.stderr)  # the nodes below, one line each as it finishes
    # the run's one judge: the project's check options, the chip, the device pool (engine/workers/device.py)
    return asyncio.run(_judged(args, setup, done, on_node, on_phase, recorder, rid, store)), rid


async def _judged(args: argparse.Namespace, setup: _Setup, done: Any, on_node: Any, on_phase: Any, recorder: Any,
                  rid: str, store: Any) -> Any:
    from ...agents.run_setup import local_engine
    from ...agents.search_job import run_search
    from ...engine.judge import Trusted

    run = setup.run
    engine = local_engine(args.jobs)
    judge = run.judge(engine, Trusted.of_file(str(setup.path), setup.text))
    try:
        return await run_search(setup.path, setup.text, setup.options, setup.provider, judge, done=done,
                                on_node=on_node, on_phase=on_phase, recorder=recorder, run_id=rid,
                                provider_for=setup.provider_for)
    finally:
        await engine.close()
        recorder.close()
        if store:
            store.close()


NODE_HEAD = f"{'node':10s} {'status':36s} {'speedup':>7s}  what it changed (its plan's first line)"


def changed(node: Any) -> str:
    """What a node changed, in a few words: its plan's first line (the planner's title for the change), else the
    strategy it was asked to try, else what kind of node it is."""
    for line in (node.plan or "").splitlines():
        words = line.strip().lstrip("#*->0123456789. ").strip().rstrip(":")
        if words:
            return words if len(words) <= 90 else words[:87].rsplit(" ", 1)[0] + "..."
    return f"(no plan; strategy: {node.strategy})" if node.strategy else f"({node.op})"


def node_line(node: Any) -> str:
    """One node in the one vocabulary: its id, its Verdict's status and its speed against the root."""
    speed = f"{node.speedup:.2f}x" if node.speedup is not None else "-"
    status = "root" if node.op == "root" else node.status + (" (improved)" if node.improved else "")
    return f"{node.id:10s} {status:36s} {speed:>7s}"


def _render(args: argparse.Namespace, setup: _Setup, graph: Any, rid: str) -> int:
    """The best node, the report, why every node failed (exit 1), and --apply."""
    path, best = setup.path, graph.best()
    from ..run_request import write_outputs

    report = write_outputs(graph, rid, setup.run.workspace / ".pallasite" / "search",
                           f"pallasite search {path.name} ({args.algo})", Path(args.report) if args.report else None)
    speed = f"{best.speedup:.2f}x" if best.speedup is not None else "-"
    print(f"best: {best.id} {speed} against the starting kernel [{best.provenance}]; {len(graph.nodes)} nodes; "
          f"stopped: {graph.stopped}; run {rid}")
    print(f"report: {report}")
    from ...analysis.verdict import judged_lines

    for line in judged_lines([(n.id, n.verdict.judged_by) for n in graph.nodes if n.op != "root"], "node"):
        print(line)  # who compared and timed each tested node (the worker's words)
    attempted = [n for n in graph.nodes if n.op != "root"]
    if attempted and not any(n.ok for n in attempted):  # every node failed: say why here, and exit 1
        print(f"error: none of the {len(attempted)} node(s) compiled, passed the tests and was "
              "timed:", file=sys.stderr)
        for node in attempted[:10]:
            print(f"  {node.id}: {node.text().splitlines()[0][:200]}", file=sys.stderr)
        return 1
    if args.apply and best.op != "root":
        from .apply_file import apply_result

        written = apply_result(path, setup.started, best.source, beside=".search.py")
        print(f"{best.id}'s source: {written.describe()}")
    return 0



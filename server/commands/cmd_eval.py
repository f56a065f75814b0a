"""`pallasite eval DIR`: evaluate a folder of JAXBench / MaxKernel tasks with the seed's metrics.

Parses arguments and renders the summaries; the evaluation is ``agents/eval_job.py`` (one verdict
per task: no candidate / compiled / correct / speedup, the meanings every command shares, README
"What the numbers mean"). Methods: ``files`` (each task's own candidate as the folder holds it:
JAXBench ``optimized.py``, MaxKernel's kernel file; a folder with only the reference is "no
candidate") and ``reference`` (the reference itself: every task "no candidate", the floor).
Without ``--backend`` the speedup would divide XLA's estimate of the reference by the cost model's
estimate of the kernel, two different models, so it is refused and said so; with ``--backend
local|ssh|ray`` both are device medians from the ``time`` op on that worker. Prints the compile
rate, the correctness rate, how many tasks had a candidate, and (when earned) the floored geomean
speedup, the share improved and fast_p; ``--output`` (or ``--format json``) and ``--report`` write the summary as JSON and as
one self-contained HTML file. Exit status: 0 evaluated, 1 a correct task without a timing, 2 usage.

Agent methods (agents/eval_agents.py): ``zero-shot --samples N``, ``auto --max-iterations K``,
``parallel|beam|evolve`` with the search's knobs, by ``--provider``; each task's run starts from its
reference and its best candidate is scored like a file. Several ``--method`` run over the same tasks
and are printed side by side. Every finished task, of every method, is stored in the results store
under the eval's id (printed; the same tasks, candidates, methods, chip and timing give the same id),
so running the same command again continues where a killed, interrupted (Ctrl-C: exit 130, the
tasks this run finished listed) or ``--task-budget``-limited run stopped; ``--provider replay:<eval
id>`` re-runs every agent with its recorded answers. Exit status 3: ``--task-budget`` stopped the run
before every task was evaluated (run it again). ``--format json --output FILE`` writes the document
to FILE and prints one line saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from typing import Any, Callable

METHODS = ("files", "reference")
AGENT_METHODS = ("zero-shot", "auto", "parallel", "beam", "evolve")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from . import flags

    parser.add_argument("folder", help="a folder of task folders (JAXBench benchmark/, MaxKernel tasks)")
    parser.add_argument("--method", action="append", choices=METHODS + AGENT_METHODS,
                        help="what to evaluate (repeatable, reported side by side; default: files)")
    agent = parser.add_argument_group("agent methods (zero-shot, auto, parallel, beam, evolve)")
    flags.add_model(agent, command, api_key_env=False)
    flags.add(agent, "--price-input", command)
    flags.add(agent, "--price-output", command)
    flags.add_rate_limits(agent, command)
    agent.add_argument("--samples", type=int, default=10, help="zero-shot: independent implementer calls per task")
    flags.add(agent, "--max-iterations", command, dest="iterations")
    flags.add_search_knobs(agent)
    flags.add(agent, "--max-nodes", command, dest="budget")
    flags.add(agent, "--seed", command)
    flags.add(agent, "--max-tokens", command)
    flags.add(agent, "--time-limit", command, dest="max_seconds")
    agent.add_argument("--task-budget", type=int,
                       help="evaluate at most this many (method, task) pairs now; run again to continue")
    flags.add(parser, "--target", command)
    flags.add(parser, "--jobs", command)
    parser.add_argument("--no-verify", action="store_true",
                        help="skip the guarded test (then no task counts as correct: 'not verified')")
    parser.add_argument("--tasks", help="only tasks whose name contains this text")
    flags.add(parser, "--kernel", command)
    flags.add(parser, "--format", command)
    flags.add(parser, "--output", command, dest="json")
    flags.add(parser, "--report", command)
    flags.add(parser, "--request-time-limit", command, dest="timeout")
    flags.add(parser, "--memory-mb", command)
    flags.add_backend(parser, command)


def candidate_for(method: str) -> Callable[[Any], str | None]:
    """``files``: the folder's own candidate, None where it holds only the reference (then the task is
    "no candidate"); ``reference``: the reference itself, which is never a candidate (every task "no
    candidate": the floor every method is compared with)."""
    def files(task: Any) -> str | None:
        if not task.candidate_path:
            return None
        with open(task.candidate_path, encoding="utf-8") as f:
            return f.read()

    def reference(task: Any) -> str:
        return task.reference_text()

    return {"files": files, "reference": reference}[method]


def _pct(v: float | None) -> str:
    return f"{v:.0%}" if v is not None else "-"


def format_summary(s: dict) -> str:
    lines = [f"method {s['method']}: {s['tasks']} tasks, {s.get('with_candidate', s['tasks'])} with a candidate "
             f"({s['provenance']})",
             f"  compiled {s['compile_rate']:.0%}  correct {s['correct_rate']:.0%}  (a task without a candidate "
             "counts as failed)"]
    if s.get("speedup_refused") or s.get("geomean_speedup") is None:
        lines.append(f"  {s.get('speedup_refused') or 'no speedup'}")
    else:
        curve = {p: v for p, v in s["fast_p"]}
        none = "; no task was correct, so every task counts 1.0x" if not s["correct_rate"] else ""
        lines.append(f"  geomean speedup {s['geomean_speedup']:.3f}x vs the task's reference (each task floored at "
                     f"1.0x{none})  improved (>1.05x) {_pct(s['improved_share'])}")
        lines.append("  fast_p: " + "  ".join(f"p={p:g}: {curve[p]:.0%}" for p in (0.0, 1.0, 1.5, 2.0, 3.0)))
    from ...analysis.verdict import judged_lines

    lines += ["  " + line for line in judged_lines([(t["task"], (t.get("verdict") or {}).get("judged_by") or "")
                                                   for t in s["per_task"]], "task")]
    for task, why in s.get("excluded") or ():
        lines.append(f"  {task}: correct, left out of the speedup figures ({why})")
    if s.get("not_judged"):
        lines.append(f"  not judged by the judge (counted apart, never correct): {', '.join(s['not_judged'])}")
    lines.append(f"  wall time {s['wall_s']:.1f} s")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Set the eval up from the arguments, evaluate every (method, task), render the tables and files."""
    from ...agents.eval_job import Incomplete
    from ...agents.eval_metrics import MissingTiming

    try:
        setup = _setup(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finished = _Finished()
    _clear_outputs(args)
    try:
        summaries = _evaluate(args, setup, finished)
    except KeyboardInterrupt:
        return _interrupted(setup, finished, args)
    except MissingTiming as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Incomplete as exc:
        print(f"note: {exc}; run the same command again to continue eval {setup.eid}", file=sys.stderr)
        return 3
    _render(args, setup.eid, summaries, replayable=bool(setup.specs))
    return 0


@dataclasses.dataclass
class _Finished:
    """The (method, task, status) this run finished, and whether each was stored as it finished."""

    tasks: list = dataclasses.field(default_factory=list)
    stored: bool = False


def _clear_outputs(args: argparse.Namespace) -> None:
    """An earlier run's --output and --report files go before this run starts: a run that is interrupted (or
    stops early) then leaves none, never an earlier run's document as if it were its own."""
    import os

    for path in (args.json, args.report):
        if path and os.path.isfile(path):
            os.remove(path)


def _interrupted(setup: "_Setup", finished: _Finished, args: argparse.Namespace) -> int:
    """Ctrl-C: the tasks finished in this run (each stored under the eval's id as it finished) and how to
    go on; exit 130."""
    for method, task, status in finished.tasks:
        print(f"  {method}: {task}: {status}", file=sys.stderr)
    unwritten = [path for path in (args.json, args.report) if path]
    if unwritten:
        print(f"pallasite eval: interrupted before the end: {' and '.join(unwritten)} not written (an earlier run's "
              "copy was removed when this run started)", file=sys.stderr)
    if finished.stored:
        print(f"\npallasite eval: interrupted; eval {setup.eid} keeps {len(finished.tasks)} task result(s) finished "
              "in this run. Run the same command to continue it.", file=sys.stderr)
    else:
        print(f"\npallasite eval: interrupted; {len(finished.tasks)} task(s) finished but nothing was recorded (the "
              "results store could not be opened: the warning above), so a re-run starts over.", file=sys.stderr)
    return 130


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What an eval starts from: the tasks, the run's setup, the agent methods' specs and models, the eval id."""

    tasks: list
    run: Any  # agents/run_setup.RunSetup: chip, provider, device, workspace
    specs: dict
    providers: Any
    names: list
    eid: str | None


def _setup(args: argparse.Namespace) -> _Setup:
    """The run's inputs; ValueError says what is wrong (before any model is asked or any code runs)."""
    from ...agents.run_setup import prepare
    from ...engine.eval_tasks import discover

    from ..run_request import run_request

    # eval runs each folder's candidate: model-written code, confined; the project's settings, flags over them
    run = prepare(run_request(args, args.folder))  # --memory-mb and --request-time-limit over the project's
    tasks = discover(args.folder)
    if args.tasks:
        tasks = [t for t in tasks if args.tasks in t.name]
    if getattr(args, "kernel", None):
        from ...engine.eval_tasks import with_kernel

        tasks = with_kernel(tasks, args.kernel)
    specs = agent_specs(args, run.provider)
    providers = provider_source(args, run) if specs else None
    names = args.method or ["files"]
    from ...agents.eval_agents import eval_id as make_eval_id

    # every method's finished tasks are stored under this id: the files method's by its candidates' text
    eid = make_eval_id(tasks, {m: specs.get(m) or _method_key(m, tasks) for m in names},
                       run.provider if specs else "", run.chip, run.where(), not args.no_verify,
                       (run.options.memory_mb,))  # not the time limit: a re-run may bound a slow task
    return _Setup(tasks, run, specs, providers, names, eid)


def _method_key(method: str, tasks: list) -> str:
    """What a method's stored results depend on besides the tasks' references: the files method's
    candidates (an edited optimized.py is a new eval, never a stale resumed row)."""
    import hashlib

    if method != "files":
        return method
    digest = hashlib.sha256()
    for task in tasks:
        text = candidate_for("files")(task)
        digest.update(f"{task.name}\0{text if text is not None else ''}\0".encode())
    return f"files:{digest.hexdigest()[:16]}"


def _evaluate(args: argparse.Namespace, setup: _Setup, finished: _Finished) -> list[dict]:
    """Every (method, task) through agents/eval_job.run_eval, each finished task stored at once (a re-run
    resumes from them) and added to ``finished``; agent methods' model calls
    recorded under <eval id>/<method>/<task>[/<sample|node>]."""
    from ...agents.eval_job import EvalJob, TaskVerdict, run_eval

    run = setup.run
    recorder, eid, device = None, setup.eid, run.device
    store = run.open_store(lambda why: print(f"warning: {why}", file=sys.stderr))
    finished.stored = store is not None
    if setup.specs:
        recorder = run.recorder()
    done = stored_rows(store, eid) if store is not None else {}
    if done:
        print(f"pallasite eval: resuming {eid}: {len(done)} task results already stored", file=sys.stderr)
    progress = lambda m: print(f"  {m}", file=sys.stderr, flush=True)  # noqa: E731
    methods = _methods(setup, recorder, progress)
    steps = {"n": len(done)}

    def on_task(method: str, task: str, row: dict) -> None:
        finished.tasks.append((method, task, TaskVerdict.from_json(row).verdict.status()))
        if store is not None:
            steps["n"] += 1
            store.put_agent_step(eid, steps["n"], "eval-task", {"method": method, "task": task, "row": row})

    how = f"estimates for {run.chip}" if device is None else f"timed on {run.where()}"
    print(f"pallasite eval: {len(setup.tasks)} tasks, methods {', '.join(methods)}, {how}"
          + (f"; eval {eid}" if eid else ""), file=sys.stderr)
    # the device is the engine's pool for these settings (engine/workers/device.py), opened and closed by run_eval
    # the run setup's check options: the project's settings (severity, limits, interpreter), as check has them
    job = EvalJob(setup.tasks, methods, chip=run.chip, jobs=args.jobs, verify=not args.no_verify, options=run.options,
                  run=run, timeout_s=run.options.time_limit_s, memory_mb=run.options.memory_mb, device=device,
                  where=run.where() if device is not None else "", allow_unconfined=run.agent.allowUnconfined,
                  progress=progress, done=done, on_task=on_task, task_budget=args.task_budget)
    try:
        return asyncio.run(run_eval(job))
    finally:
        if recorder is not None:
            recorder.close()
        if store is not None:
            store.close()


def _methods(setup: _Setup, recorder: Any, progress: Any) -> dict:
    """Each method's source of a task's candidate: an agent run, or the folder's own file (or the reference)."""
    if not setup.specs:
        return {m: candidate_for(m) for m in setup.names}
    from ...agents.eval_agents import AgentMethod

    return {m: (AgentMethod(setup.specs[m], setup.providers, setup.eid, m, recorder=recorder, progress=progress)
                if m in setup.specs else candidate_for(m)) for m in setup.names}


def _render(args: argparse.Namespace, eid: str | None, summaries: list[dict], replayable: bool = False) -> None:
    """The tables (or the JSON document with --format json: on stdout, or in --output FILE with one line on
    stdout saying so), the eval id, --output and --report."""
    # 3: agent methods (per task: the agent's plan, source, usage, budgets), the eval id
    document = {"version": 3, "eval_id": eid, "methods": summaries}
    as_json = args.format == "json"
    if as_json and not args.json:  # --format json alone: the document on stdout
        print(json.dumps(document, indent=1))
    elif not as_json:
        for s in summaries:
            print(format_summary(s))
        print(side_by_side(summaries))  # each task's result per method, one method included
        for line in failures(summaries):
            print(line)
    if eid:
        replay = f" (replay it: --provider replay:{eid})" if replayable else ""
        print(f"eval {eid}{replay}", file=sys.stderr if as_json else sys.stdout)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=1)
        if as_json:
            tasks = len(summaries[0]["per_task"]) if summaries else 0
            print(f"pallasite eval: {len(summaries)} method(s) over {tasks} task(s); the JSON document is in {args.json}")
    if args.report:
        from ..reports.report_html import eval_html

        with open(args.report, "w", encoding="utf-8") as f:
            f.write(eval_html(summaries, title=f"pallasite eval {args.folder}"))
        print(f"report: {args.report}", file=sys.stderr)


def agent_specs(args: argparse.Namespace, provider: str) -> dict:
    """The agent methods asked for, with their knobs (ValueError: a knob out of range)."""
    from ...agents.eval_agents import AgentSpec
    from ...agents.search import SearchOptions

    specs = {}
    for m in args.method or []:
        if m not in AGENT_METHODS:
            continue
        search = None
        if m in ("parallel", "beam", "evolve"):
            search = SearchOptions(algo=m, seed=args.seed, max_nodes=args.budget, trajectories=args.trajectories,
                                   iterations=args.iterations, width=args.width, depth=args.depth,
                                   branches=args.branches, keep_factor=args.keep_factor, population=args.population,
                                   generations=args.generations, crossover_rate=args.crossover_rate)
        specs[m] = AgentSpec(m, samples=args.samples, iterations=args.iterations, search=search,
                             max_tokens=args.max_tokens, max_seconds=args.max_seconds)
    if specs and not provider:
        raise ValueError(f"--method {', '.join(specs)} runs a model: give --provider (gemini, openai, scripted, "
                         "or replay:<eval id>)")
    return specs


def provider_source(args: argparse.Namespace, run: Any) -> object:
    """The provider every task asks (one, shared), or a replay of a recorded eval (ValueError: why not)."""
    from ...agents.eval_agents import ProviderSource
    from ...agents.llm.providers import ProviderError, make_provider
    from ...knowledge.store import store_path

    from ..run_request import provider_config

    name, workspace = run.provider, run.workspace
    if name.startswith("replay:"):
        recorded = name.split(":", 1)[1].strip()
        path = store_path(workspace)
        rows = {}
        if path.exists():
            with run.open_store() as store:
                rows = stored_rows(store, recorded)
        if not rows:
            raise ValueError(f"replay:{recorded}: no recorded eval of that id in {path} (an eval prints its id at "
                             "the end; run the replay from the same folder)")
        return ProviderSource(lambda task: None, replay_store=str(path), replay_of=recorded)
    try:
        provider = make_provider(provider_config(args, run))
    except ProviderError as exc:
        raise ValueError(str(exc)) from None
    return ProviderSource(lambda task: provider)


def stored_rows(store, eid: str) -> dict:
    """The task rows an eval stored, by (method, task): the newest of each."""
    rows = {}
    for step in store.agent_steps(eid):
        if step.kind == "eval-task":
            rows[(step.payload["method"], step.payload["task"])] = step.payload["row"]
    return rows


def failures(summaries: list[dict]) -> list[str]:
    """Each task that is not correct, per method, with its evidence line (the verdict's why: the elements outside
    which tolerance, the error, what was not verified), so the text output says what the JSON says."""
    lines = []
    for s in summaries:
        for t in s["per_task"]:
            verdict = t.get("verdict") or {}
            if t.get("correct") or not t.get("candidate"):
                continue
            why = verdict.get("evidence") or "; ".join(t.get("errors") or ()) or verdict.get("text") or t["status"]
            lines.append(f"  {t['task']} ({s['method']}): {t['status']}: {why}")
    return ["", "not correct, with the evidence:", *lines] if lines else []


def side_by_side(summaries: list[dict]) -> str:
    """The seed's table, one row per method, then each task's speedup per method."""
    head = f"{'method':<44} {'compiled':>9} {'correct':>9} {'geomean':>8} {'fast_1':>7} {'improved':>9} " \
           f"{'tokens':>9} {'calls':>6} {'cost':>8} {'wall s':>7}"
    lines = ["", "side by side (" + summaries[0]["provenance"] + "; speedups vs the task's reference, floored at 1.0x "
             "in the geomean; wall s: the method's own, a candidate an earlier method evaluated is not evaluated "
             "again)", head]
    for s in summaries:
        n = s["tasks"]
        fast1 = dict((p, v) for p, v in s["fast_p"]).get(1.0) if s["fast_p"] else None
        use = s.get("agent_usage") or {}
        cost = use.get("cost_usd")
        geo = f"{s['geomean_speedup']:.3f}x" if s["geomean_speedup"] is not None else "refused"
        lines.append(f"{(s.get('label') or s['method'])[:44]:<44} "
                     f"{round(s['compile_rate'] * n)}/{n:<7} {round(s['correct_rate'] * n)}/{n:<7} {geo:>8} "
                     f"{'-' if fast1 is None else str(round(fast1 * n)) + '/' + str(n):>7} "
                     f"{'-' if s['improved_share'] is None else str(round(s['improved_share'] * n)) + '/' + str(n):>9} "
                     f"{use.get('total_tokens', '-'):>9} {use.get('calls', '-'):>6} "
                     f"{'-' if cost is None else format(cost, '.2f') + '$':>8} "
                     f"{'-' if s.get('wall_s') is None else format(s['wall_s'], '.1f'):>7}")
    tasks = [t["task"] for t in summaries[0]["per_task"]]
    # each task's speedup, or its status in the one vocabulary (analysis/verdict.STATUSES) in full: a column is
    # as wide as its longest cell, so "not compiled for the chip" is never cut to "not compiled"
    columns = [[f"{t['speedup']:.2f}x" if t["speedup"] is not None else t["status"] for t in s["per_task"]]
               for s in summaries]
    widths = [max(12, *(len(c) for c in cells)) for cells in columns]
    lines.append("")
    lines.append(f"{'task':<30} " + " ".join(f"{s['method'][:w]:>{w}}" for s, w in zip(summaries, widths)))
    for i, name in enumerate(tasks):
        cells = [cells[i] if i < len(cells) else "-" for cells in columns]
        lines.append(f"{name[:30]:<30} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
    return "\n".join(lines)

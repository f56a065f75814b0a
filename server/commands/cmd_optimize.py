"""`pallasite optimize FILE`: the plan -> implement -> compile-fix -> test -> autotune -> profile loop.

    pallasite optimize kernel.py --provider gemini --max-iterations 5
    pallasite optimize kernel.py --mode step                 # pause after each phase (approve/revise/stop)
    pallasite optimize kernel.py --resume 3f2a9c01d4e5       # continue a crashed or cancelled run
    pallasite optimize kernel.py --provider replay:3f2a9c01d4e5   # re-run with the recorded replies
    pallasite optimize --export 3f2a9c01d4e5 kernel.py       # the run as JSON (replays to the same table)
    pallasite optimize kernel.py --format json               # the final table as JSON
    pallasite optimize kernel.py --write-tests               # propose kernel.tests.py (validated), then stop
    pallasite optimize kernel.py --max-rounds 2              # compile-fix rounds through the verified fixer

Each phase is printed live (stderr in json format). Without a device backend (``--backend estimate``,
the default) candidates are checked in TPU interpret mode on CPU (at reduced shapes when the
example is large) and ranked by the cost model's estimate for ``--target``; with ``--backend local|ssh|ray`` on a machine with a TPU they are
timed on the device (a worker that answers CPU timings ranks nothing). The winner is written beside
the original (``<name>.optimized.py``) or over it with ``--apply``.

Tests: a file without ``example_inputs``/``reference`` gets them from the test writer
(agents/test_writer.py), validated against the original kernel in a worker. ``--write-tests`` writes
the proposal to ``<name>.tests.py`` and stops for review; a later run uses that file (``--tests``
names another). Once a run starts its tests' hash is recorded; ``--resume`` with other tests is
refused. The winner rule (analysis/verdict.pick_winner): only a correct candidate faster than the
original by the same method wins; the table marks it with ``*`` and says "no winner: <why>" otherwise.
Exit status: 0 a winner was written (``--write-tests``: tests written), 1 no winner (the reason is
printed), 2 usage or configuration error, or a refused resume.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

JSON_VERSION = 1


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from . import flags

    parser.add_argument("path", metavar="FILE", help="the kernel file to optimize")
    parser.add_argument("--mode", choices=("auto", "step"), default="auto",
                        help="auto: run unattended; step: pause after each phase for approve / revise / stop")
    flags.add(parser, "--max-iterations", command, dest="iterations")
    flags.add(parser, "--max-tokens", command)
    flags.add(parser, "--time-limit", command, dest="max_seconds")
    flags.add_model(parser, command)
    flags.add(parser, "--target", command)
    flags.add_backend(parser, command)
    parser.add_argument("--resume", metavar="RUN_ID", help="continue a recorded run from its last snapshot (an "
                        "interrupted run of FILE resumes by itself)")
    parser.add_argument("--new-run", action="store_true",
                        help="start a new run even where an interrupted run of FILE could resume")
    parser.add_argument("--export", action="store_true", help="print the run named by --resume as JSON and exit")
    flags.add(parser, "--apply", command)
    flags.add(parser, "--format", command)
    flags.add(parser, "--max-rounds", command, dest="fix_rounds")
    parser.add_argument("--write-tests", action="store_true",
                        help="the file lacks example_inputs/reference: write the test writer's validated proposal "
                             "to FILE's .tests.py for review, and stop")
    parser.add_argument("--tests", metavar="PY", help="the frozen tests to use (default: FILE's .tests.py if present)")
    parser.add_argument("--test-rounds", type=int, default=3, help="the test writer's proposals at most (default 3)")


def tests_path(path: str) -> Path:
    """Where ``--write-tests`` puts the proposal and where a later run looks: ``<stem>.tests.py``."""
    from ...agents.optimize_job import tests_path as reviewed

    return reviewed(path)


def budget_report(state, budgets) -> dict:
    """Each budget: what the run spent of it (the final table's footer, ``--format json``'s ``budgets``)."""
    return {"iterations": {"used": len(state.iterations), "limit": budgets.iterations},
            "tokens": {"used": state.usage.total_tokens, "limit": budgets.max_tokens},
            "seconds": {"used": round(state.seconds, 1), "limit": budgets.max_seconds},
            "fix_rounds": {"limit": budgets.fix_rounds}}


def table_text(state, budgets=None) -> str:
    """The final table (what each column means: docs/optimize.md)."""
    from ...agents.optimize import row_word
    from ...analysis.verdict import judged_lines

    rows = [f"{'it':>2}  {'status':<38} {'compiled':<8} {'correct':<7} {'time':>11}  {'speedup':>8}  {'tokens':>7}  plan"]
    for r in state.table():
        mark = "*" if r["best"] else " "
        t = f"{r['time_s'] * 1e6:.2f} us" if r["time_s"] else "-"
        s = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        yn = {True: "yes", False: "no", None: "-"}
        word = row_word(r)  # the verdict's own words (analysis/verdict.STATUSES)
        rows.append(f"{r['iteration']:>2}{mark} {word:<38} {yn[r['compiled']]:<8} {yn[r['correct']]:<7} {t:>11}  "
                    f"{s:>8}  {r['tokens']:>7}  {r['plan'][:60]}")
    rows += [f"    iteration {r['iteration']}: {r['why']}" for r in state.table() if r.get("why")]
    rows += judged_lines([(str(r["iteration"]), r.get("judged_by") or "") for r in state.table()], "iteration")
    base = f"{state.baseline_s * 1e6:.2f} us" if state.baseline_s else "not measured"
    rows.append(f"times: {state.method}; baseline: the original file, {base} by the same method; speedup = baseline / time")
    rows.append(state.outcome().why)
    if budgets is not None:
        b = budget_report(state, budgets)
        rows.append(f"budget: {b['iterations']['used']} of {b['iterations']['limit']} iteration(s), "
                    f"{b['tokens']['used']} of {b['tokens']['limit']} tokens, {b['seconds']['used']:.1f} s in "
                    f"iterations (the whole run, tests and baseline included, is bounded by {b['seconds']['limit']:g} s); "
                    f"stopped: {state.stopped}; run id {state.run_id}")
    else:
        rows.append(f"budget: {len(state.iterations)} iteration(s), {state.usage.total_tokens} tokens, {state.seconds:.1f} s; "
                    f"stopped: {state.stopped}; run id {state.run_id}")
    if state.context.get("tests_summary"):
        rows.append(f"tests: {state.context['tests_summary'][:200]}; hash {state.context.get('tests_hash')}")
    return "\n".join(rows)


def _ask_user(prompt: str) -> str:
    """A question on stderr, the answer from stdin: stdout carries only the result (``--format json``)."""
    print(prompt, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline()


def _console_gate(plans_dir: Path, run_id: str):
    """Step mode on a terminal: each phase shown, then approve / revise / stop read from stdin. The plan
    and the proposed tests are files to edit (server/commands/plan_files.py): a file the user edited is never
    written over (a resumed run keeps the edit of the plan it was cut off at), and is what the run uses."""
    from ...agents.optimize import Decision
    from .plan_files import edited, propose

    async def gate(phase: str, payload: dict) -> Decision:
        if phase == "tests":
            review = plans_dir / f"{run_id}-tests.py"
            shown = propose(review, payload["tests"])
            print(f"\n{_shown_as(shown, review, 'proposed tests (' + payload.get('summary', '') + ')', 'them')}:\n"
                  f"{shown.text}\n", file=sys.stderr)
        elif phase == "plan":
            review = plans_dir / f"{run_id}-{payload['iteration']}.md"
            shown = propose(review, payload["plan"] + "\n")
            print(f"\n{_shown_as(shown, review, 'plan', 'it')}:\n{shown.text.rstrip()}\n", file=sys.stderr)
        elif phase == "implement":
            print(payload["diff"], file=sys.stderr)
        else:
            return Decision("approve")
        raw = await asyncio.to_thread(_ask_user, "[a]pprove, [r]evise, [s]top? ")
        answer = raw.strip().lower()
        if not raw or answer.startswith("s"):  # "": input ended (no terminal, a closed pipe): stop, never approve
            if not raw:
                print(f"\npallasite optimize: input ended before an answer at the {phase} (step mode needs one per "
                      f"phase): stopping, nothing approved; the run is kept: --resume {run_id} continues it, "
                      "--mode auto runs without answers", file=sys.stderr)
                return Decision("stop", why=f"stopped: input ended before an answer at the {phase} (nothing approved)")
            return Decision("stop")
        if phase in ("tests", "plan"):
            text = edited(review)  # the user's text, approved or sent as the revision, is what the run uses
            if answer.startswith("r") or text is not None:
                return Decision("revise", text if text is not None else review.read_text(encoding="utf-8"))
            return Decision("approve")
        if answer.startswith("r"):
            instruction = await asyncio.to_thread(_ask_user, "what should change? ")
            if not instruction:
                print("\npallasite optimize: input ended before the revision: stopping", file=sys.stderr)
                return Decision("stop", why=f"stopped: input ended before the revision at the {phase}")
            return Decision("revise", instruction)
        return Decision("approve")

    return gate


def _shown_as(shown: Any, review: Path, what: str, pronoun: str) -> str:
    """The heading of a reviewed file: the proposal (edit the file to revise it), or the user's edit, kept."""
    if shown.kept:
        return f"{what}: your edit of {review} is kept (the new proposal was not written over it); approve uses it"
    return f"{what} (edit {review} to revise {pronoun})"


def run(args: argparse.Namespace) -> int:
    """Set the run up from the arguments, run the loop (or --export / --write-tests), write and render."""
    from ...agents.llm.providers import ProviderError

    recorder = None
    try:
        try:  # the setup's own failures (an internal error elsewhere keeps its traceback)
            req = _request(args)  # the flags converted once: nothing below reads argparse
            checked = _check(req)
            recorder = checked.run.recorder()
            if req.export:
                return _export(req, recorder)
            setup = _setup(req, checked, recorder)
        except ValueError as err:
            return _fail(str(err))
        try:
            final = asyncio.run(_optimize(req, setup, recorder))
        except ProviderError as err:
            return _fail(str(err))
        except KeyboardInterrupt:
            return _interrupted(req, setup, recorder)
    finally:
        if recorder is not None:
            recorder.close()
    if isinstance(final, int):  # --write-tests
        return final
    _remember_interrupted(setup.run.workspace, req.path, None)  # it ran to its end: nothing to resume
    return _fail(final) if isinstance(final, str) else _render(req, setup, final, recorder)


def _interrupted(req: _Request, setup: _Setup, recorder: Any) -> int:
    """Ctrl-C: what was kept, and how to go on; the same command resumes the run (exit 130)."""
    state = setup.state
    if recorder.store is None:
        print(f"\npallasite optimize: interrupted; run {state.run_id} was not recorded ({'; '.join(recorder.problems)}), "
              "so it cannot resume", file=sys.stderr)
        return 130
    _remember_interrupted(setup.run.workspace, req.path, state.run_id)
    done = [it for it in state.iterations if it.verdict not in ("not run", "stopped")]
    print(f"\npallasite optimize: interrupted; run {state.run_id} is kept in the results store with "
          f"{len(done)} finished iteration(s) (an iteration cut off re-runs). Run the same command to resume it "
          f"(or --resume {state.run_id}); --new-run starts over.", file=sys.stderr)
    return 130


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


@dataclasses.dataclass(frozen=True)
class _Request:
    """optimize's flags, converted and checked once at the door (nothing below ``run`` reads argparse)."""

    path: str
    mode: str  # "auto" or "step"
    iterations: int
    max_tokens: int | None
    max_seconds: float | None
    fix_rounds: int
    test_rounds: int
    tests: str | None  # --tests
    write_tests: bool
    export: bool
    resume: str | None
    new_run: bool
    apply: bool
    format: str
    run: Any  # agents/run_setup.RunRequest: the settings, the model, the device, the limits


def _request(args: argparse.Namespace) -> _Request:
    """The flags as a ``_Request``; ValueError says what is wrong, before any model is asked."""
    from ..run_request import refuse_non_kernel, run_request

    path = args.path
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such file")
    refuse_non_kernel(path, "optimize")
    if args.iterations < 1:
        raise ValueError(f"--max-iterations {args.iterations}: give at least 1")
    if args.fix_rounds < 0 or args.test_rounds < 1:
        raise ValueError("--max-rounds must be 0 or more and --test-rounds at least 1")
    return _Request(path=path, mode=args.mode, iterations=args.iterations, max_tokens=args.max_tokens,
                    max_seconds=args.max_seconds, fix_rounds=args.fix_rounds, test_rounds=args.test_rounds,
                    tests=args.tests, write_tests=args.write_tests, export=args.export, resume=args.resume,
                    new_run=args.new_run, apply=args.apply, format=args.format,
                    run=run_request(args, path, runs_model_code=not args.export))


@dataclasses.dataclass(frozen=True)
class _Checked:
    """The request checked against the file and the settings: the run's setup and its tests."""

    run: Any  # agents/run_setup.RunSetup
    tests: str | None
    tests_file: Path


def _check(req: _Request) -> _Checked:
    """The run's setup (agents/run_setup.py) and its tests; ValueError says what is wrong, before any model
    is asked (candidates that could not run confined are refused here)."""
    from ...agents.run_setup import prepare

    tests_file = Path(req.tests) if req.tests else tests_path(req.path)
    if req.tests and not tests_file.is_file():
        raise ValueError(f"--tests {req.tests}: no such file")
    tests = tests_file.read_text(encoding="utf-8") if tests_file.is_file() and not req.write_tests else None
    return _Checked(prepare(req.run), tests, tests_file)


def _export(req: _Request, recorder: Any) -> int:
    """``--export``: the recorded run named by ``--resume`` as JSON."""
    from ...agents.optimize_record import export

    if not req.resume or recorder.store is None:
        raise ValueError("--export needs --resume RUN_ID and a readable results store")
    try:
        print(json.dumps(export(recorder.store, req.resume), indent=2))
    except KeyError as err:
        raise ValueError(err.args[0]) from None
    return 0


@dataclasses.dataclass
class _Setup:
    """What an optimize run starts from: the file's bytes, the run state (new or resumed), the budgets."""

    started: bytes
    state: Any
    run: Any  # agents/run_setup.RunSetup: chip, check options, device, provider
    budgets: Any
    tests: str | None
    tests_file: Path
    resumed: bool = False


def _setup(req: _Request, checked: _Checked, recorder: Any) -> _Setup:
    """The run state (a new one, or the one --resume names) and the budgets."""
    from ...agents.optimize import new_run
    from ...agents.optimize_job import budgets as job_budgets
    from ...agents.optimize_record import load
    from ...engine.checker import read_source
    from ...knowledge.store import store_path

    run, path = checked.run, req.path
    started = Path(path).read_bytes()  # --apply writes over the file only if it is still these bytes
    text = read_source(path)
    resume = req.resume or (None if req.new_run else _interrupted_run(run.workspace, path, text, recorder))
    if resume:
        state = load(recorder.store, resume) if recorder.store is not None else None
        if state is None:
            raise ValueError(f"--resume {resume}: no such run in {store_path(run.workspace)}")
        if text != state.original:  # edited since the run began: --apply must not write over those edits
            started = state.original.encode("utf-8")
    else:
        state = new_run(str(Path(path).resolve()), text)
    state.context.setdefault("chip", run.chip)
    budgets = job_budgets(req.iterations, max_tokens=req.max_tokens, max_seconds=req.max_seconds,
                          fix_rounds=req.fix_rounds, request_timeout_s=run.agent.requestTimeoutS,
                          test_rounds=req.test_rounds)
    return _Setup(started, state, run, budgets, checked.tests, checked.tests_file, resumed=bool(resume))


def _interrupted_file(workspace: str) -> Path:
    return Path(workspace) / ".pallasite" / "optimize-interrupted.json"


def _interrupted_runs(workspace: str) -> dict[str, str]:
    """File (absolute path) -> the run id of its interrupted optimize run (Ctrl-C), kept to resume it."""
    try:
        data = json.loads(_interrupted_file(workspace).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember_interrupted(workspace: str, path: str, run_id: str | None) -> None:
    """Keep (``run_id``) or forget (None) the interrupted run of ``path``."""
    from ...knowledge.store import pallasite_folder

    runs = _interrupted_runs(workspace)
    key = str(Path(path).resolve())
    if run_id is None and key not in runs:
        return
    runs.pop(key, None)
    if run_id is not None:
        runs[key] = run_id
    try:
        pallasite_folder(workspace)
        _interrupted_file(workspace).write_text(json.dumps(runs, indent=2), encoding="utf-8")
    except OSError as err:
        print(f"warning: {_interrupted_file(workspace)}: cannot record the interrupted run ({err})", file=sys.stderr)


def _interrupted_run(workspace: str, path: str, text: str, recorder: Any) -> str | None:
    """The interrupted run of ``path`` to resume, when its file is unchanged since; said on stderr."""
    from ...agents.optimize_record import load

    run_id = _interrupted_runs(workspace).get(str(Path(path).resolve()))
    if not run_id or recorder.store is None:
        return None
    state = load(recorder.store, run_id)
    if state is None or state.original != text:
        print(f"pallasite optimize: {path} changed since run {run_id} was interrupted: starting a new run",
              file=sys.stderr)
        _remember_interrupted(workspace, path, None)
        return None
    print(f"pallasite optimize: resuming run {run_id}, interrupted after {len(state.iterations)} iteration(s) "
          "(--new-run starts over)", file=sys.stderr)
    return run_id


async def _optimize(req: _Request, setup: _Setup, recorder: Any):
    """The optimize job (agents/optimize_job.run_optimize) on a fresh engine, or --write-tests."""
    from ...agents.optimize_job import OptimizeJob, make_evaluator, run_optimize
    from ..run_request import command_line_provider
    from ...engine.engine import Engine
    from ...knowledge.store import pallasite_folder

    run, state = setup.run, setup.state
    workspace, config = run.workspace, run.provider_config()
    model = command_line_provider(config, "optimize")
    engine = Engine(workspace=workspace)
    try:
        job = OptimizeJob(req.path, state.original, setup.budgets, tests=setup.tests,
                          tests_name=setup.tests_file.name, state=state, resumed=setup.resumed)
        judge = run.judge(engine, job.trusted())  # the run's one judge (engine/judge.py)
        if req.write_tests:
            evaluator = make_evaluator(job, judge, model, recorder, state)
            return await write_tests(req.path, state, model, evaluator, recorder, setup.budgets)
        gate = _console_gate(pallasite_folder(workspace) / "plans", state.run_id) if req.mode == "step" else None

        def on_phase(iteration: int, phase: str, message: str) -> None:
            print(f"[{iteration}] {phase}: {message}", file=sys.stderr, flush=True)

        def started(st, evaluator) -> None:
            print(f"pallasite optimize: run {st.run_id}, {req.mode} mode, {evaluator.method}, provider "
                  f"{config.label()}", file=sys.stderr, flush=True)

        return await run_optimize(job, run, judge, model, recorder, gate=gate, on_phase=on_phase, on_start=started)
    finally:
        await model.close()
        await engine.close()


def _render(req: _Request, setup: _Setup, final: Any, recorder: Any) -> int:
    """The winner written (beside the file, or over it with --apply), the table or JSON, the exit status."""
    path, best = req.path, final.winner
    written, not_applied = None, ""
    if final.winner is not None:
        from .apply_file import apply_result, write_atomic

        if req.apply:
            result = apply_result(path, setup.started, final.winner.source, beside=".optimized.py")
            written, not_applied = result.path, result.why
        else:
            written = str(Path(path).with_suffix(".optimized.py"))
            write_atomic(written, final.winner.source)
    if req.format == "json":
        print(json.dumps({"version": JSON_VERSION, "tool": "pallasite optimize", "run_id": final.run_id,
                          "method": final.method, "baseline_s": final.baseline_s, "table": final.table(),
                          "best": best.index if best else None, "winner": final.outcome().why,
                          "speedup": final.outcome().speedup.value if best else None, "written": written,
                          "not_applied_why": not_applied,
                          "stopped": final.stopped, "usage": dataclasses.asdict(final.usage),
                          "seconds": final.seconds, "budgets": budget_report(final, setup.budgets),
                          "tests": {"hash": final.context.get("tests_hash"), "written": final.context.get("tests_summary")},
                          "problems": recorder.problems}, indent=2))
    else:
        print(table_text(final, setup.budgets))
        if written:
            print(f"the winner is in {written}" + (f" ({not_applied})" if not_applied else ""))
        for problem in recorder.problems:
            print(f"note: {problem}")
    if final.stopped.startswith("refused"):
        print(f"error: {final.stopped}", file=sys.stderr)
        return 2
    if not written:
        print(f"pallasite optimize: {final.outcome().why}", file=sys.stderr)
    return 0 if written else 1


async def write_tests(path: str, state, model, evaluator, recorder, budgets) -> int:
    """``--write-tests``: the test writer's validated proposal to ``<stem>.tests.py``, for review."""
    from ...agents import test_writer
    from ...agents.optimize import propose_tests

    missing = test_writer.needs(state.original, path)
    if not missing:
        print(f"{path} has its own tests (example inputs and reference): nothing to write", file=sys.stderr)
        return 0
    proposal = await propose_tests(state, model, evaluator, budgets, missing, recorder=recorder,
                                   on_round=lambda m: print(f"[tests] {m}", file=sys.stderr, flush=True))
    target = tests_path(path)
    if not proposal.ok:
        print(f"pallasite optimize: no tests written: {proposal.summary}", file=sys.stderr)
        if proposal.text:
            print(f"the last proposal was:\n{proposal.text}", file=sys.stderr)
        return 1
    header = (f"# Frozen tests for {Path(path).name}, proposed by pallasite's test writer; "
              f"{' '.join(proposal.summary[:200].split())}.\n"
              "# Review them: `pallasite optimize` uses this file as the kernel's tests and records its hash.\n")
    target.write_text(header + proposal.text, encoding="utf-8")
    print(f"wrote {target} ({proposal.summary}); review it, then run: pallasite optimize {path}")
    print(f"tokens: {state.usage.total_tokens}; rounds: {proposal.rounds}")
    return 0

"""The MCP server's tools that run kernel code: ``estimate``, ``judge``, ``tune``.

Each goes through the one run setup (agents/run_setup.prepare: the project's settings, the chip, the check
options, confinement) and the run's one ``Judge`` (engine/judge.py), as the commands do:

- ``judge``: a candidate's text judged as `pallasite optimize` judges one (``Judge.verdict``, the original's
  frozen tests and reviewed ``<name>.tests.py``, the candidate in confined workers only; a task folder as
  `pallasite eval` judges it), with the baseline timed by the same judge and one ``try_speedup``;
- ``estimate``: the Judge's cost-model estimator on the user's file, paired with its reference by one
  model (engine/estimates.pair_result), as `pallasite time --backend estimate` shows it;
- ``tune``: engine/tuning/tune.tune with the judge's estimator, test and compile (tier 2), as the
  editor's autotune runs it, bounded by the call's budgets.

Each call has an engine of its own, closed when the call ends, cancelled or timed out: its workers end
with it. Only a trusted folder runs them (server/mcp/mcp_folder.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...engine.tuning.judge_tune import config_estimator
from ...analysis.types import to_json
from ...analysis.verdict import judged_lines, try_speedup

from .mcp_folder import Folder, ToolRefused, text_argument
from ..reports.report_format import edit_json


def _read(path: Path) -> str:
    from ...engine.checker import SourceDecodeError, read_source

    try:
        return read_source(str(path))
    except OSError as err:
        raise ToolRefused(f"{path}: cannot read it ({err.strerror or err})") from None
    except SourceDecodeError as err:
        raise ToolRefused(f"{path}: {err}") from None


def _setup(folder: Folder, path: Path, args: dict[str, Any], **request: Any) -> tuple[Any, list[str]]:
    """The run setup for ``path`` (agents/run_setup.prepare) and the settings' warnings; a refusal says why."""
    from ...agents.run_setup import prepare
    from ..run_request import request_for

    settings, warnings = folder.settings(path)
    try:
        run = prepare(request_for(str(path), settings, target=args.get("target"),
                                 cwd=str(folder.root), **request))
    except ValueError as err:
        raise ToolRefused(str(err)) from None
    return run, [f"settings: {w}" for w in warnings]


def _own_kernel(state: Any, args: dict[str, Any], what: str) -> tuple[Path, str, Any, list[str]]:
    """The user's own kernel file named by ``path`` (a trusted folder's; ``what`` says what would run), its
    text and its run setup: no model-written code runs (estimate, tune)."""
    folder = state.folder
    folder.require_trust(what)
    path = folder.file(args["path"])
    run, notes = _setup(folder, path, args, judge=False, runs_model_code=False)
    return path, _read(path), run, notes


def _engine(run: Any) -> Any:
    from ...engine.engine import Engine

    return Engine(workspace=run.workspace, use_store=False)


# ---------------------------------------------------------------------------- estimate


async def estimate(state: Any, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    from ...engine.estimates import pair_result
    from ...engine.judge import Trusted
    from ...engine.tuning.tune import TuneError, TuneOptions

    path, text, run, notes = _own_kernel(state, args, "the estimate (it traces the kernel in a worker)")
    engine = _engine(run)
    try:
        judge = run.judge(engine, Trusted(str(path), text), device=None)
        estimator = config_estimator(judge, text, TuneOptions(chip=run.chip, entry=args.get("entry")),
                                           on_progress=progress.say)
        progress.say(f"tracing {path.name} and its reference for the cost model ({run.chip})")
        result = await estimator([], {})
    except TuneError as err:
        raise ToolRefused(f"estimate: {err}") from None
    finally:
        await engine.close()
    return estimate_result(str(path), run.chip, pair_result(result), result, notes)


def estimate_result(path: str, chip: str, paired: Any, result: Any, notes: list[str]) -> dict[str, Any]:
    """`pallasite time --backend estimate`'s figures (engine/estimates.PairedEstimate, every field) with the
    kernel's whole estimate (its terms, bound, factors) and, when the estimate carries one, its interval."""
    from ..reports.timing_format import estimate_text

    est = result.estimates[0] if result.estimates else None
    out = {**to_json(paired), "path": path, "target": chip, "speedup": paired.speedup,
           "estimate": to_json(est), "notes": notes}
    interval = next((getattr(x, "interval") for x in (paired, est) if getattr(x, "interval", None) is not None), None)
    if interval is not None:
        out["interval"] = to_json(interval)
    text = estimate_text(path, paired) + (f"\nno estimated speedup: {paired.why}" if paired.why else "")
    return {**out, "text": "\n".join([text, *notes])}


# ---------------------------------------------------------------------------- judge


def _trusted_side(folder: Folder, args: dict[str, Any]) -> tuple[str, Path, Any, str]:
    """(what the candidate is judged against, its path, the judge's ``Trusted``, the baseline's name): the
    user's original file with its frozen and reviewed tests (optimize's), or a task's reference (eval's)."""
    from ...agents.optimize_job import reviewed_tests
    from ...engine.judge import Trusted

    if ("file" in args) == ("task" in args):
        raise ToolRefused("judge: give exactly one of `file` (the user's original kernel file) and `task` "
                          "(a JAXBench or MaxKernel task folder)")
    if "file" in args:
        from ..run_request import refuse_non_kernel

        path = folder.file(args["file"], "file")
        try:
            refuse_non_kernel(path, "mcp judge")
        except ValueError as err:
            raise ToolRefused(str(err)) from None
        return "file", path, Trusted.of_file(str(path), _read(path), reviewed_tests(str(path))), "the original file"
    from ...agents.eval_job import BASELINE
    from ...engine.eval_tasks import discover

    path = folder.subfolder(args["task"], "task")
    try:
        tasks = [t for t in discover(str(path)) if Path(t.folder) == path]
    except ValueError as err:
        raise ToolRefused(f"task: {err}") from None
    if not tasks:
        raise ToolRefused(f"task {args['task']!r}: not a task folder itself (JAXBench: baseline.py; MaxKernel: "
                          "kernel_task.yaml); give the one task's folder")
    return "task", path, Trusted.of_task(tasks[0]), BASELINE


async def judge(state: Any, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    folder = state.folder
    folder.require_trust("the judge (it runs the original's reference and tests in a worker)")
    candidate = text_argument(args, "candidate")
    against, path, trusted, baseline_name = _trusted_side(folder, args)
    run, notes = _setup(folder, path, args, runs_model_code=True)  # model-written: confined, or refused here
    engine = _engine(run)
    try:
        judge_ = run.judge(engine, trusted)  # as `pallasite optimize` builds its one judge: the run setup's limits
        progress.say(f"compiling the candidate for {run.chip} (tiers {','.join(map(str, judge_.options.tiers))})")
        if (await judge_.compile(candidate)).ok:
            progress.say("testing it against the reference in a confined worker, then estimating it")
        verdict = await judge_.verdict(candidate)
        baseline = await _baseline(judge_, trusted, candidate, verdict, progress) if verdict.passed else None
    finally:
        await engine.close()
    return judge_result(against, str(path), run.chip, judge_.method, verdict, baseline, baseline_name, notes)


async def _baseline(judge: Any, trusted: Any, candidate: str, verdict: Any, progress: Any) -> Any:
    """What the candidate's figure is divided into: the original timed by the same judge (optimize's
    baseline), or the task's reference priced beside the candidate (eval's)."""
    if trusted.task:
        return (await judge.time(candidate)).reference
    progress.say("timing the original by the same method (the baseline)")
    return (await judge.time(trusted.original)).candidate


def judge_result(against: str, path: str, chip: str, method: str, verdict: Any, baseline: Any, baseline_name: str,
                 notes: list[str]) -> dict[str, Any]:
    speedup, refused = try_speedup(baseline, verdict.timing, baseline_name=baseline_name) if verdict.passed \
        else (None, None)
    lines = [f"{path}: candidate: {verdict.text()}",
             *judged_lines([(f"for {Path(path).name}", verdict.judged_by)], "the candidate")]
    if verdict.timing is not None:
        lines.append(f"time: {verdict.timing.text()}")
    if speedup is not None or refused:
        lines.append(f"speedup: {speedup.text()}" if speedup is not None else refused)
    lines.append(f"times: {method}; baseline: {baseline_name}" + (f", {baseline.text()}" if baseline else ""))
    return {"against": against, "path": path, "chip": chip, "method": method, "status": verdict.status(),
            "judged_by": to_json(verdict.judged_by), "verdict": verdict.to_json(),
            "baseline": baseline.to_json() if baseline is not None else None,
            "speedup": {**to_json(speedup), "text": speedup.text()} if speedup is not None else None,
            "speedup_refused": refused, "notes": notes, "text": "\n".join(lines + notes)}


# ---------------------------------------------------------------------------- tune


async def tune(state: Any, args: dict[str, Any], progress: Any) -> dict[str, Any]:
    from ...engine.tuning.tune import TuneError, TuneOptions

    path, text, run, notes = _own_kernel(state, args, "tune (it traces, compiles and runs the kernel in workers)")
    options = TuneOptions(chip=run.chip, entry=args.get("entry"), verify=args.get("verify", 3),
                          declared=dict(run.settings.tunables) or None, estimates=args.get("max_estimates", 256),
                          compiles=args.get("max_compiles", 16))
    engine = _engine(run)
    store = run.open_store(on_error=notes.append)
    try:
        report = await _tuned(run, engine, path, text, options, store, progress)
    except TuneError as err:
        raise ToolRefused(f"tune: {err}") from None
    finally:
        if store is not None:
            store.close()
        await engine.close()
    return tune_result(report, notes)


async def _tuned(run: Any, engine: Any, path: Path, text: str, options: Any, store: Any, progress: Any) -> Any:
    """engine/tuning/tune.tune with the run's judge: its estimator, its test, its compile for the chip."""
    from ...engine.judge import Trusted
    from ...engine.tuning.tune import tune as tune_file

    judge = run.judge(engine, Trusted.of_file(str(path), text), device=None)  # the run setup's time limit
    return await tune_file(str(path), text, options, config_estimator(judge, text, options, backend=judge.backend(),
                                                                            on_progress=progress.say),
                           tester=judge.test, store=store, progress=progress.say, compiler=judge.compile)


def tune_result(report: Any, notes: list[str]) -> dict[str, Any]:
    from ..editor.tune_lsp import summary

    best = report.best
    verdict = report.verdict(best) if best is not None else None
    speed = report.speedup_vs_current()
    notes = notes + list(report.notes)
    return {"path": report.path, "chip": report.chip, "best": dict(best) if best is not None else None,
            "current": dict(report.current), "provenance": report.best_provenance,
            "compile": report.best_compile.to_json() if report.best_compile is not None else None,
            "verdict": verdict.to_json() if verdict is not None else None,
            "edits": [edit_json(e) for e in report.edits],
            "speedup_vs_current": {"value": speed[0], "provenance": speed[1]} if speed else None,
            "rejected": dict(report.rejected), "explored": report.explored, "stopped": report.stopped,
            "configurations": len(report.outcomes), "notes": notes,
            "text": "\n".join([f"{report.path}: {summary(report)}" if best is not None else
                               f"{report.path}: no configuration both ranked and compiled for {report.chip}",
                               *(f"note: {n}" for n in notes)])}

"""`pallasite check PATH...`: the checker's verdict on files and folders, as text or JSON.

Settings come from ``[tool.pallasite]`` in the nearest pyproject.toml (the same keys as the
language server's ``pallasite`` section); command-line flags override them.

Output is quiet: a clean, fully checked file prints nothing (``--verbose`` adds notes, information
findings and a line per file). Exit status 1 for errors; with ``--strict`` (or ``check.strict``)
also for a file not fully checked (a tier skipped, a limit hit, no task).

Files are checked concurrently on a pool of warm workers (``--jobs N``, default one per core, at
most 4), through the engine (engine/engine.py). In the text format each file's result is printed
as it finishes, with a progress line on a terminal (server/commands/check_progress.py), then the summary
with the wall time; the JSON document comes at the end, files in path order. Files without Pallas
(plain-JAX baselines next to the kernels) are skipped quietly and counted in the summary.

Every check is recorded in the workspace's results store (``.pallasite/results.sqlite``, see
``engine/store_cache.py``), and an unchanged kernel's tier-2 verdict is reused from it instead of
recompiled (a note says so); ``--no-store`` neither reads nor writes it.

Ctrl-C stops the check: the files finished so far are printed with their findings (text: in path
order; JSON and SARIF: a document of those files), their verdicts stay in the results store (a
re-run reuses them), and the exit status is 130.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from ...analysis.codes import CODES

EXIT_STATUS = ("exit status: 0 no error found (warnings and notes do not fail a check); 1 an error found, or with "
               "--strict a file not fully checked; 2 a usage error (an unknown flag or chip, no such file) or an "
               "internal failure; 130 interrupted (Ctrl-C)")

SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "node_modules", ".pallasite", "build", "dist"}


from .flags import UsageError, parse_tiers  # noqa: E402,F401 - the --tiers reader, shared with fix


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from . import flags

    parser.epilog = EXIT_STATUS
    parser.add_argument("paths", nargs="+", metavar="PATH", help="kernel files or folders (searched for *.py)")
    flags.add(parser, "--target", command)
    flags.add(parser, "--tiers", command)
    flags.add(parser, "--format", command)
    parser.add_argument("--details", action="store_true", help="text format: also print the compiler's full output (MLIR etc.)")
    parser.add_argument(
        "--script",
        action="store_true",
        help="run each file's own __main__ in the worker and check every pallas_call it makes (tiers 1-2 at the recorded shapes)",
    )
    flags.add(parser, "--time-limit", command)
    parser.add_argument(
        "--severity",
        action="append",
        default=[],
        metavar="CODE=LEVEL",
        help="override a code's severity (error, warning, information, hint, off); repeatable",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail (exit 1) when a file was not fully checked: a tier skipped, a time or memory limit, no task "
             "(default from the check.strict setting)",
    )
    flags.add(parser, "--verbose", command)
    flags.add(parser, "--jobs", command)
    parser.add_argument("-j", type=int, dest="jobs", metavar="N", help="the same as --jobs")
    flags.add(parser, "--no-store", command, dest="no_cache")
    parser.add_argument(
        "--keep-warm", type=float, default=None, metavar="SECONDS",
        help="keep this run's workers warm for the next run for SECONDS after it (a keeper process of your user; "
             "a run with the same settings in the same folder uses them and skips their start-up)")
    parser.add_argument(
        "--locate",
        action="store_true",
        help="after tier 3 finds wrong, NaN or unwritten outputs, find the statement that makes them so: small "
             "mechanical edits of the statements that reach them, each re-run at tier 3's reduced size; the finding "
             "lands at the statement whose edit makes every check match, with that edit as a verified fix (adds "
             "tier 3 to --tiers)",
    )
    parser.add_argument("--locate-budget", type=float, metavar="S", default=None,
                        help="seconds the locate step may spend on one file's edits (default check.locateBudgetS, 60)")


def expand_paths(paths: list[str]) -> list[str]:
    files: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(
                str(p)
                for p in sorted(path.rglob("*.py"))
                if not any(part in SKIP_DIRS or part.startswith(".") for part in p.relative_to(path).parts[:-1])
            )
        elif path.is_file():
            files.append(str(path))
        else:
            raise UsageError(f"{raw}: no such file or folder")
    return files


def _options_and_strict(args: argparse.Namespace, files: list[str]):
    from ...engine.checker import TARGETS
    from ..run_request import project_settings

    settings = project_settings(files[0] if files else Path.cwd())
    options = settings.check_options()
    changes: dict = {}
    if args.target is not None:
        if args.target not in TARGETS:
            raise UsageError(f"--target {args.target!r}: unknown chip; choose one of {', '.join(TARGETS)}")
        changes["target"] = args.target
    if args.tiers is not None:
        changes["tiers"] = parse_tiers(args.tiers)
    if args.script:
        changes["script"] = True
    changes["locate"] = bool(getattr(args, "locate", False))  # only on the command line: `--locate`
    if changes["locate"]:
        tiers = changes.get("tiers", options.tiers)
        changes["tiers"] = tuple(sorted(set(tiers) | {3}))  # the step locates tier 3's failures
    budget = getattr(args, "locate_budget", None)
    if budget is not None:
        if not budget > 0:
            raise UsageError(f"--locate-budget {budget}: give a positive number of seconds")
        changes["locate_budget_s"] = budget
    if args.time_limit is not None:
        if not args.time_limit > 0:
            raise UsageError(f"--time-limit {args.time_limit}: give a positive number of seconds")
        changes["time_limit_s"] = args.time_limit
    if args.severity:
        severity = dict(options.severity)
        for item in args.severity:
            code, sep, level = item.partition("=")
            if not sep or level not in ("error", "warning", "information", "hint", "off"):
                raise UsageError(f"--severity {item!r}: expected CODE=LEVEL, LEVEL one of error, warning, information, hint, off")
            code = code.strip().upper()
            if code not in CODES:
                raise UsageError(f"--severity {item!r}: unknown code {code}; `pallasite explain --list` lists them")
            severity[code] = level
        changes["severity"] = severity
    return dataclasses.replace(options, **changes), bool(getattr(args, "strict", False) or settings.check.strict)


def jobs_for(args: argparse.Namespace) -> int:
    from ...engine.workers.pool import default_checks

    jobs = getattr(args, "jobs", None)
    if jobs is None:
        return default_checks()
    if jobs < 1:
        raise UsageError(f"--jobs {jobs}: give the number of files to check at once (1 or more)")
    return jobs


def _say_if_not_recorded(files: list[str]) -> None:
    """Once, when the run's results store (the one ``check_paths_sync`` uses) cannot record (damaged,
    unreadable): why, and what to do."""
    from ...engine.store_cache import workspace_for
    from ...knowledge.store import problem

    why = problem(workspace_for(files))
    if why is not None:
        print(f"warning: results are not recorded: {why}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from ...engine.engine import check_paths_sync
    from ..reports import report_format
    from .check_progress import CheckProgress

    started = time.monotonic()
    try:
        files = expand_paths(args.paths)
        options, strict = _options_and_strict(args, files)
        jobs, keep_warm = jobs_for(args), _keep_warm(args)
    except (UsageError, ValueError) as err:  # ValueError: a bad [tool.pallasite] (server/settings.SettingsError)
        print(f"error: {err}", file=sys.stderr)
        return 2
    use_store = not getattr(args, "no_cache", False)
    if use_store and any(tier > 0 for tier in options.tiers):  # the compiler tiers' verdicts are recorded
        _say_if_not_recorded(files)
    progress = CheckProgress(files, tiers=options.tiers, text=args.format == "text", details=args.details,
                             verbose=getattr(args, "verbose", False), target=options.target)
    try:
        reports = check_paths_sync(files, options, jobs=jobs, use_store=use_store, on_report=progress,
                                   keep_warm_s=keep_warm)
    except KeyboardInterrupt:
        progress.close()
        return _interrupted(args.format, files, progress.done, options, time.monotonic() - started, use_store)
    finally:
        progress.close()
    status = report_format.exit_status(reports, options.tiers, strict=strict)
    status = _nothing_checked(args.paths, strict, status) if not files else status
    print(_closing(args.format, reports, options, time.monotonic() - started, status))
    return status


def _keep_warm(args: argparse.Namespace) -> float | None:
    keep_warm = getattr(args, "keep_warm", None)
    if keep_warm is not None and not keep_warm > 0:
        raise UsageError(f"--keep-warm {keep_warm:g}: give a positive number of seconds")
    return keep_warm


def _nothing_checked(paths: list[str], strict: bool, status: int) -> int:
    """A folder without a .py file: nothing was checked, said once; --strict never calls that a pass (exit 1)."""
    print(f"{'error' if strict else 'warning'}: nothing to check: no .py file in {', '.join(paths)}"
          + ("; --strict fails a run that checked nothing" if strict else ""), file=sys.stderr)
    return 1 if strict else status


def _interrupted(form: str, files: list[str], done: list, options, wall_s: float, stored: bool) -> int:
    """Ctrl-C: the finished files (printed above in text; here the document of those files), what was
    kept, exit 130."""
    order = {path: i for i, path in reversed(list(enumerate(files)))}
    done = sorted(done, key=lambda r: order.get(r.path, len(files)))
    print(_closing(form, done, options, wall_s, 130))
    kept = " (their verdicts are kept in the results store: a re-run reuses them)" if stored and done else ""
    print(f"pallasite check: interrupted after {len(done)} of {len(files)} file(s){kept}", file=sys.stderr)
    return 130


def _closing(form: str, reports, options, wall_s: float, status: int) -> str:
    """What ends the output: the JSON or SARIF document, or the text summary line."""
    from ..reports import report_format

    if form == "json":
        return report_format.to_json_text(reports, target=options.target, tiers=options.tiers, wall_s=wall_s)
    if form == "sarif":
        from ..reports.report_sarif import to_sarif_text

        return to_sarif_text(reports, target=options.target, tiers=options.tiers, exit_code=status)
    return report_format.summary_line(reports, target=options.target, tiers=options.tiers, wall_s=wall_s)

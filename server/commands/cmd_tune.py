"""`pallasite tune FILE`: autotune a kernel's tunables for a TPU chip (engine/tuning/tune.py does the work).

Without a device backend (the default, ``--backend estimate``) configurations are ranked by the
cost model's estimate for the chip, labelled "estimate (<chip>)"; nothing is timed and no speedup
is claimed beyond the estimate's own ratio. ``--apply`` writes the best configuration into the
file as a minimal edit (only the changed literals), shown as a diff; the file is re-read first
and left alone if it changed meanwhile. Exit: 0 tuned, 1 nothing feasible / no tunables, 2 usage
or internal failure.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import os
import sys
from typing import Any

from ...analysis import feasibility
from ...engine.tuning.judge_tune import config_estimator, config_timer
from ...analysis.source import apply_edits
from ...analysis.types import to_json
from ...engine.tuning.tune import TuneError, TuneOptions, TuneReport, tune
from ...engine.tuning.tune_workers import device_platform
from .console import Progress

# "estimate": the cost model only; "local": a worker on this machine timing on its accelerator
# (the judge's `time` requests). Remote backends (ssh, ray) plug in through engine.tune.DeviceTimer the same way.
BACKENDS = ("estimate", "local", "ssh", "ray")  # ssh / ray: the engine's device pool (engine/workers/device.py)


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from . import flags

    parser.add_argument("file", help="the kernel file (with a task: docs/task-convention.md)")
    flags.add(parser, "--target", command, dest="chip")
    flags.add(parser, "--entry", command)
    flags.add(parser, "--backend", command)
    flags.add_pool(parser, command)
    flags.add(parser, "--max-evaluations", command, dest="budget")
    parser.add_argument("--max-estimates", type=int, metavar="N", dest="estimates",
                        help="configurations traced and estimated at most (default 1024; a larger space is "
                             "explored by seeded random sampling and local moves)")
    flags.add(parser, "--seed", command)
    flags.add(parser, "--apply", command)
    parser.add_argument("--verify", type=int, default=3, metavar="N",
                        help="without a device: test the configuration tune picks with the judge's test (its exported "
                             "program against the reference, on CPU at reduced sizes), trying at most N (0: skip; "
                             "default 3)")
    flags.add(parser, "--format", command)
    flags.add(parser, "--no-store", command)
    parser.add_argument("--top", type=int, default=15, help="rows of the table (text format)")
    parser.add_argument("--max-compiles", type=int, default=16, metavar="N", dest="compiles",
                        help="tier-2 compiles at most while walking the ranking for a configuration the compiler "
                             "accepts (default 16; the current configuration is compiled besides)")
    parser.add_argument("--audit-precheck", type=int, default=0, metavar="N", dest="audit",
                        help="also compile N configurations the VMEM pre-check rejected (nearest the limit first) "
                             "and say whether the compiler agrees (default 0)")
    flags.add(parser, "--verbose", command)
    flags.add(parser, "--memory-mb", command)
    flags.add(parser, "--jobs", command)


def run(args: argparse.Namespace) -> int:
    """Read the file and the settings, tune, render; --apply writes the best configuration."""
    path = os.path.abspath(args.file)
    try:
        text, run, options = _setup(args, path)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    store = None if args.no_store else run.open_store(lambda why: print(f"warning: {why}", file=sys.stderr))
    try:
        report = asyncio.run(_tune(path, text, options, store, quiet=args.format == "json", jobs=max(1, args.jobs),
                                   device=run.device, run=run))
    except TuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if store is not None:
            store.close()
    print(json.dumps(report_json(report), indent=1) if args.format == "json"
          else format_report(report, args.top, verbose=args.verbose))
    if report.best is None:  # nothing passed tier 2 (the report says why): nothing is applied
        return 1
    return _apply(path, text, report) if args.apply else 0


def _setup(args: argparse.Namespace, path: str):
    """The file's text, the run's setup (agents/run_setup.py: chip, check options, device for ssh/ray)
    and the tune options; OSError or ValueError says what is wrong."""
    from ...agents.run_setup import prepare

    from ..run_request import device_settings, refuse_non_kernel, run_request

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise OSError(f"cannot read {args.file}: {exc.strerror}") from None
    except UnicodeDecodeError:
        text = ""  # refused just below, saying what the file is
    refuse_non_kernel(args.file, "tune", does="tunes a Pallas kernel's block sizes")
    if args.estimates is not None and args.estimates < 1:
        raise ValueError("--max-estimates must be at least 1")
    # tune times the user's own kernel at other block sizes: no model-written code runs
    run = prepare(run_request(args, path, target=args.chip, judge=False, runs_model_code=False,
                              device=device_settings(args) if args.backend in ("ssh", "ray") else None))
    options = TuneOptions(chip=run.chip, entry=args.entry, budget=args.budget, backend=args.backend,
                          verify=max(0, args.verify), declared=dict(run.settings.tunables) or None,  # [tool.pallasite]
                          estimates=args.estimates, seed=args.seed, compiles=max(0, args.compiles),
                          audit=max(0, args.audit))
    return text, run, options


async def _tune(path: str, text: str, options: TuneOptions, store: Any, quiet: bool, jobs: int = 1,
                device: Any = None, *, run: Any) -> TuneReport:
    """The tune with the run's one judge (agents/run_setup.RunSetup.judge): each configuration is priced (or
    timed on the device), tested and compiled for the chip (tier 2) by it, like any other candidate, against
    the file as written (the trusted original)."""
    from ...engine.engine import Engine, worker_config
    from ...engine.judge import Trusted
    from ...engine.workers.pool import local_backend

    shown = Progress(quiet=quiet)  # a rewritten line on a terminal; nothing in a log (server/commands/console.py)

    def progress(message: str, fraction: float | None = None) -> None:
        shown.say(message, fraction)

    # job workers estimate; a device worker (the machine's accelerator) times with --backend local. Workers start
    # with their first request: a kernel answered from the store starts none.
    config = worker_config(run.options)  # the run setup's interpreter, memory and time limits, as every command
    backend = local_backend(config, checks=0, jobs=jobs, device=options.backend == "local")
    engine = Engine(use_store=False)
    judge = run.judge(engine, Trusted.of_file(path, text), device=None)

    def after_estimates(call: Any) -> Any:
        # the estimating workers are done before the first compile or test: their memory goes back first
        # (issue 44: under 2 GiB)
        async def step(configured: str) -> Any:
            if options.backend == "estimate":
                await backend.close()
            return await call(configured)
        return step
    try:
        timer = await _device_timer(judge, engine, backend, text, options, config, device, progress)
        return await tune(path, text, options, config_estimator(judge, text, options, backend=backend, parallel=jobs,
                                                                      on_progress=progress),
                          timer=timer, tester=after_estimates(judge.test), store=store, progress=progress,
                          compiler=after_estimates(judge.compile))
    finally:
        await backend.close()
        await engine.close()
        shown.close()


async def _device_timer(judge: Any, engine: Any, backend: Any, text: str, options: TuneOptions, config: Any,
                        device: Any, progress: Any) -> Any:
    """The judge's device timer: ssh / ray: a batch's configurations timed at once on the engine's device pool;
    local: this machine's accelerator (refused where jax sees only a CPU); None for estimates."""
    import dataclasses

    if device is not None:
        engine.device_events = lambda line: progress(line)
        pool = engine.device(device, dataclasses.replace(config, platforms=None))
        return config_timer(judge, text, options, backend=pool, on_progress=progress)
    if options.backend != "local":
        return None
    platform = await device_platform(backend, timeout_s=judge.timeout_s)
    if platform in (None, "cpu"):
        raise TuneError("--backend local: this machine's jax sees no accelerator (platform "
                        f"{platform or 'unknown: the device worker did not start'}); CPU timings never "
                        "rank. Use --backend estimate here, or run on a TPU host")
    return config_timer(judge, text, options, backend=backend, on_progress=progress)


def _apply(path: str, text: str, report: TuneReport) -> int:
    if not report.edits:
        print("nothing to apply: the current configuration is already the best")
        return 0
    with open(path, encoding="utf-8") as f:
        if f.read() != text:
            print(f"error: {path} changed while tuning; not applied (run again)", file=sys.stderr)
            return 1
    new = apply_edits(text, report.edits)
    sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), path, path))
    with open(path, "w", encoding="utf-8") as f:
        f.write(new)
    changed = _changes(report.best, report.current)  # only the values the edit wrote, not every tunable
    print(f"applied {changed} to {path} (by {report.best_provenance}; the other tunables keep their values)")
    return 0


# --------------------------------------------------------------------------- output


def _config(config: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in config) if config else "-"


def _changes(config: Any, current: Any) -> str:
    """The values of ``config`` that differ from the current configuration, or "(current)"."""
    now = dict(current or ())
    return ", ".join(f"{k}={v}" for k, v in config if now.get(k) != v) or "(current)"


def _us(seconds: float | None) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds is not None else "-"


def _ranks(o: Any) -> bool:
    """Whether a configuration has a figure a speedup may be shown for: by the run's method, and neither
    rejected by the compiler (or the pre-check) nor found wrong by the judge's test."""
    v = o.verdict
    return v.timing is not None and v.compile.ok is not False and v.test.outcome != "wrong"


def format_walk(report: TuneReport, verbose: bool = False, shown: int = 8) -> list[str]:
    """The walk through tier 2 (engine/tuning/tune_walk.py): what was compiled, what the compiler said, what was
    skipped and why, and where the pre-check and the compiler disagreed."""
    walk = report.walk
    if walk is None:
        return []
    chip = report.chip
    fresh = f" ({report.compiled_stored} verdicts read back from the results store)" if report.compiled_stored else ""
    lines = [f"tier 2 (compiled for {chip}), down the ranking: {walk.compiled} compiled ({walk.count('passed')} passed, "
             f"{walk.count('rejected')} rejected by the compiler, {walk.count('unchecked')} not finished, "
             f"{walk.count('refused')} found wrong by the judge's test), {walk.count('skipped')} skipped without "
             f"compiling; at most {walk.budget} compiles: {walk.stopped}{fresh}"]
    steps = walk.steps if verbose else walk.steps[:shown]
    for step in steps:
        what = _changes(step.config, report.current)
        if step.state == "skipped":
            lines.append(f"  skipped {what}: at least as large as {_changes(step.like, report.current)}, which ran "
                         f"out of VMEM on {chip}")
            continue
        line = f"  {step.state} {what}: {step.compile.text() if step.compile else ''}"
        if step.state == "refused":  # compiled, then the judge's test refused it: say what the test found
            judged = report.outcome(step.config)
            line += f"; the judge's test: {judged.verdict.test.text() if judged else 'refused it'}"
        if step.out_of_vmem:
            line += " (out of VMEM"
            if step.needed and step.limit:
                line += f": the compiler needed {_mib(step.needed)} of {_mib(step.limit)}"
            if step.counted is not None:
                line += f"; the pre-check counted {_mib(step.counted)}, blocks x buffers + scratch"
            line += ")"
        lines.append(line)
        if verbose and step.compile is not None and step.compile.ok is not True and step.compile.evidence:
            lines += [f"      {e[:400]}" for e in step.compile.evidence.splitlines()[:3]]
    if len(walk.steps) > len(steps):
        lines.append(f"  ... {len(walk.steps) - len(steps)} more steps (-v)")
    missed = [s for s in walk.steps if s.state == "rejected" and s.out_of_vmem]
    if missed:
        extra = [s.needed - s.counted for s in missed if s.needed and s.counted is not None]
        lines.append(f"pre-check vs the compiler: {len(missed)} configuration(s) the pre-check let through ran out of "
                     f"VMEM at the compiler" + (f" (it needed {_mib(min(extra))} to {_mib(max(extra))} more than "
                     "blocks x buffers + scratch: its internal scratch and the kernel's temporaries)" if extra else "")
                     + "; configurations at least as large are skipped without compiling")
    if report.audited:
        agreed = [r.ok is False and feasibility.out_of_vmem(r.why, r.evidence) for _, _, r in report.audited]
        lines.append(f"pre-check audit: of {len(agreed)} configurations it rejected for VMEM (nearest the limit), the "
                     f"compiler ran out of VMEM on {sum(agreed)}" + ("" if all(agreed) else " (the others: below)"))
        for (config, counted, result), ok in zip(report.audited, agreed):
            if verbose or not ok:
                sizes = feasibility.compiler_vmem(result.evidence)
                lines.append(f"  {_changes(config, report.current)}: counted {_mib(counted)}; {result.text()}"
                             + (f" (needed {_mib(sizes[0])} of {_mib(sizes[1])})" if sizes else ""))
    if report.current_compile is not None:
        lines.append(f"the current configuration: {report.current_compile.text()}")
    return lines


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.2f} MiB"


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut at a word boundary and marked " ..." (never mid-word);
    the whole text is in --format json."""
    if len(text) <= width:
        return text
    cut = text[:width - 3].rstrip()
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,;:(") + "..."


def format_table(report: TuneReport, top: int = 15) -> list[str]:
    """The configurations in the report's order (the one ranking), each with its verdict's words."""
    label = report.label
    head = ("config (changes from the current)", "verdict", label, "bound", "measured (device)", "vs current",
            "provenance")
    rows = [head]
    current = report.outcome(report.current)
    current = current if current is not None and _ranks(current) else None
    for o in report.outcomes[:top]:
        vs = "-"  # only configurations that rank get a speedup; the others show their verdict's why
        gain = report.speedup_between(current, o) if _ranks(o) and current else None
        if gain is not None:  # analysis/verdict.speedup: one method on both sides
            vs = f"{gain.value:.2f}x ({'device' if report.backend != 'estimate' else 'est.'})"
        mark = " *" if o.config == report.best else ""
        words = (f"same program as {_changes(o.duplicate_of, report.current)}: " if o.duplicate_of else "") + \
            o.verdict.text()
        prov = "device" if o.measured_s is not None else (label if _ranks(o) else "-")
        estimate = _us(o.estimate_s) if o.verdict.compile.ok is not False else "-"
        rows.append((_changes(o.config, report.current) + mark, clip(words, 70), estimate, o.bound or "-",
                     _us(o.measured_s), vs, prov))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if len(report.outcomes) > top:
        lines.append(f"... {len(report.outcomes) - top} more (--top N, or --format json)")
    return lines


def format_report(report: TuneReport, top: int = 15, verbose: bool = False) -> str:
    label = report.label
    lines = [f"{report.path}: {report.entry} on {report.chip} ({report.backend}): "
             f"{report.explored or f'{len(report.outcomes)} configurations'}; "
             f"{sum(report.rejected.values())} rejected before compiling"
             + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(report.rejected.items()))})" if report.rejected else "")]
    lines += format_table(report, top)
    speed = report.speedup_vs_current()
    best = (f"best: {_changes(report.best, report.current)} by {report.best_provenance}" if report.best is not None else
            "best: none (no configuration both ranked and passed; see the notes)")
    if report.best is not None:
        best += f" ({report.verdict(report.best).text()})"
    if speed:
        best += f"; {speed[0]:.2f}x vs the current configuration, {speed[1]}"
    lines.append(best)
    lines += format_walk(report, verbose)
    broken = report.current_compile is not None and report.current_compile.ok is not True
    if broken:  # said in the headline, not only at --top 200
        lines.append(f"the current configuration {_config(report.current)}: {report.verdict(report.current).text()}")
    lines += _versus_reference(report, broken)
    if report.backend == "estimate":
        lines.append(f"no device backend: ranked by the cost model's {label} (roofline; not a measurement; "
                     "see docs/tune.md)")
    else:
        lines.append(f"{report.strategy}: {report.evaluations} device evaluations, {report.reused} reused; {report.stopped}")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


def _versus_reference(report: TuneReport, broken: bool) -> list[str]:
    """The best (and the current configuration) against the plain-JAX reference, each by one method."""
    lines = []
    vs_ref = report.speedup_vs_reference()
    if vs_ref:
        lines.append(f"{vs_ref[0]:.2f}x vs {vs_ref[1]}")
    vs = [(name, p) for name, p in (("the current configuration", None if broken else report.current_vs_reference),
                                    ("the best", report.best_vs_reference)) if p is not None]
    shown = [f"{name} {p.speedup:.2f}x" for name, p in vs if p.speedup is not None]
    if shown:
        lines.append(f"vs the plain-JAX reference, both by {vs[0][1].label}: " + ", ".join(shown)
                     + " (reference " + _us(vs[0][1].reference_s) + "; a model's figures, not measurements)")
    elif vs and vs[0][1].why:
        lines.append(f"no estimated speedup vs the reference: {vs[0][1].why}")
    if report.reference and (report.reference.get("xla") or {}).get("optimal_seconds"):
        lines.append(f"XLA's own optimal_seconds for the reference (shown, never divided): "
                     f"{_us(report.reference['xla']['optimal_seconds'])}")
    return lines


def report_json(report: TuneReport) -> dict[str, Any]:
    data = to_json(report)
    data["label"] = report.label
    for item, o in zip(data["outcomes"], report.outcomes):  # each configuration's Verdict, serialised once
        item["verdict"] = o.verdict.to_json()
    for key, config in (("best_verdict", report.best), ("current_verdict", report.current)):
        verdict = report.verdict(config)  # the one vocabulary (analysis/verdict.Verdict), serialised once
        data[key] = verdict.to_json() if verdict is not None else None
    speed = report.speedup_vs_current()
    data["speedup_vs_current"] = {"value": speed[0], "provenance": speed[1]} if speed else None
    vs_ref = report.speedup_vs_reference()  # device times of the kernel and the reference only
    data["speedup_vs_reference"] = {"value": vs_ref[0], "baseline": vs_ref[1]} if vs_ref else None
    for key in ("current_vs_reference", "best_vs_reference"):
        paired = getattr(report, key)
        data[f"estimated_{key}"] = {"value": paired.speedup, "label": paired.label, "why": paired.why} if paired else None
    return data

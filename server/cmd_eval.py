"""`pallasite eval DIR`: evaluate a folder of JAXBench / MaxKernel tasks with the seed's metrics.

Methods: ``files`` (each task's own candidate as the folder holds it: JAXBench ``optimized.py``,
MaxKernel's kernel file; the reference where there is none) and ``reference`` (the reference itself:
the 1.0x floor every method is measured against). Speedups are the cost model's estimates for
``--target`` (``--backend estimate``, the default), or with ``--backend local|ssh|ray`` device
medians of the candidate against its reference from the ``time`` op on that worker, one timing at a
time, labelled "device (<kind>)"; no CPU timing ever becomes a speedup, and a correct task without
a device timing stops the summary with an error (never 1.0x). Prints compile rate, correctness
rate, the floored geomean speedup, the share improved and fast_p; ``--json`` and ``--report`` write
the summary as JSON and as one self-contained HTML file.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import sys
import time
from typing import Any, Callable

METHODS = ("files", "reference")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("folder", help="a folder of task folders (JAXBench benchmark/, MaxKernel tasks)")
    parser.add_argument("--method", action="append", choices=METHODS,
                        help="what to evaluate (repeatable; default: files)")
    parser.add_argument("--target", default="v6e", help="the chip whose cost model estimates speedups")
    parser.add_argument("--jobs", type=int, default=1, help="tasks evaluated at once (job workers)")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip the interpret-mode comparison (then no task counts as correct)")
    parser.add_argument("--tasks", help="only tasks whose name contains this text")
    parser.add_argument("--json", help="write the summaries here as JSON")
    parser.add_argument("--report", help="write a self-contained HTML report here")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per worker request")
    parser.add_argument("--memory-mb", type=int, default=8192,
                        help="memory limit of each worker (interpret-mode checks of big kernels need several GiB)")
    from .cmd_search import add_backend_arguments

    add_backend_arguments(parser)


def candidate_for(method: str) -> Callable[[Any], str]:
    def files(task: Any) -> str:
        path = task.candidate_path or task.reference_path
        with open(path, encoding="utf-8") as f:
            return f.read()

    def reference(task: Any) -> str:
        return task.reference_text()

    return {"files": files, "reference": reference}[method]


async def evaluate(tasks: list, methods: dict[str, Callable[[Any], Any]], *, chip: str, jobs: int = 1,
                   verify: bool = True, timeout_s: float = 300.0, backend: Any = None, memory_mb: int = 8192,
                   progress: Callable[[str], None] = lambda m: None, device: Any = None,
                   where: str = "", allow_unconfined: bool = False) -> list[dict]:
    """Run each method over the tasks; return one Summary (as JSON) per method. With ``device`` (an
    open backend, named by ``where``) every candidate is timed there, one timing at a time, while
    the methods' own work (a model's answers) overlaps; without it the cost model estimates."""
    from pallasite.agents.eval_metrics import CaseOutcome, TaskOutcome, summarize
    from pallasite.engine.eval_tasks import estimate_candidate, time_candidate
    from pallasite.engine.pool import local_backend
    from pallasite.engine.client import WorkerConfig

    own = backend is None
    backend = backend or local_backend(WorkerConfig(timeout_s=timeout_s, memory_mb=memory_mb, confine=True,
                                                    allow_unconfined=allow_unconfined), checks=0, jobs=max(1, jobs))
    gate = asyncio.Semaphore(max(1, jobs))
    device_slot = asyncio.Semaphore(1)
    out = []
    try:
        for name, method in methods.items():
            started = time.monotonic()
            done = 0

            async def one(task: Any) -> TaskOutcome:
                nonlocal done
                async with gate:
                    try:
                        text = method(task)
                        if inspect.isawaitable(text):  # a provider's answer
                            text = await text
                        if device is not None:
                            async with device_slot:
                                r = await time_candidate(device, task, text, where=where or "device",
                                                         timeout_s=timeout_s)
                        else:
                            r = await estimate_candidate(backend, task, text, chip, verify=verify,
                                                         timeout_s=timeout_s)
                        case = CaseOutcome(r.compiled, r.correct, r.speedup, r.error)
                        prov = r.provenance
                    except Exception as exc:  # noqa: BLE001 - one task's failure is data
                        case, prov = CaseOutcome(False, False, None, f"{type(exc).__name__}: {exc}"[:300]), ""
                done += 1
                progress(f"{name}: {done}/{len(tasks)} {task.name}")
                return TaskOutcome(task.name, (case,), prov)

            outcomes = await asyncio.gather(*(one(t) for t in tasks))
            if device is not None:
                kinds = sorted({o.provenance for o in outcomes if o.provenance.startswith("device (")})
                provenance = (", ".join(kinds) or f"device ({where})") + " medians, candidate vs reference; " \
                    "the reference itself is 1.0x by definition"
            else:
                provenance = f"estimate ({chip}) where estimated; the reference itself is 1.0x by definition"
            summary = summarize(name, outcomes, provenance=provenance, wall_s=time.monotonic() - started)
            out.append(summary.to_json())
    finally:
        if own:
            await backend.close()
    return out


def format_summary(s: dict) -> str:
    curve = {p: v for p, v in s["fast_p"]}
    lines = [f"method {s['method']}: {s['tasks']} tasks ({s['provenance']})",
             f"  compiled {s['compile_rate']:.0%}  correct {s['correct_rate']:.0%}  "
             f"geomean speedup {s['geomean_speedup']:.3f}x (each task floored at 1.0x, vs its reference)  "
             f"improved (>1.05x) {s['improved_share']:.0%}",
             "  fast_p: " + "  ".join(f"p={p:g}: {curve[p]:.0%}" for p in (0.0, 1.0, 1.5, 2.0, 3.0)),
             f"  wall time {s['wall_s']:.1f} s"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from pallasite.agents.eval_metrics import MissingTiming
    from pallasite.engine.eval_tasks import discover

    try:
        tasks = discover(args.folder)
    except ValueError as exc:
        print(f"pallasite eval: {exc}", file=sys.stderr)
        return 2
    if args.tasks:
        tasks = [t for t in tasks if args.tasks in t.name]
    methods = {m: candidate_for(m) for m in (args.method or ["files"])}
    from .cmd_search import device_settings, device_where, open_device, untrusted_refusal

    try:
        settings = device_settings(args)
    except ValueError as exc:
        print(f"pallasite eval: {exc}", file=sys.stderr)
        return 2
    refused = untrusted_refusal(settings, args.allow_unconfined)
    if refused:  # eval runs each folder's candidate: model-written code, confined
        print(f"pallasite eval: error: {refused}", file=sys.stderr)
        return 2
    how = f"estimates for {args.target}" if settings is None else f"timed on {device_where(settings)}"
    print(f"pallasite eval: {len(tasks)} tasks, methods {', '.join(methods)}, {how}", file=sys.stderr)

    async def go() -> list[dict]:
        device, where_ = open_device(settings, args.memory_mb, args.timeout, allow_unconfined=args.allow_unconfined) \
            if settings is not None else (None, "")
        try:
            return await evaluate(tasks, methods, chip=args.target, jobs=args.jobs, verify=not args.no_verify,
                                  timeout_s=args.timeout, memory_mb=args.memory_mb, device=device, where=where_,
                                  allow_unconfined=args.allow_unconfined,
                                  progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
        finally:
            if device is not None:
                await device.close()

    try:
        summaries = asyncio.run(go())
    except MissingTiming as exc:
        print(f"pallasite eval: {exc}", file=sys.stderr)
        return 1
    for s in summaries:
        print(format_summary(s))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"version": 1, "methods": summaries}, f, indent=1)
    if args.report:
        from pallasite.server.report_html import eval_html

        with open(args.report, "w", encoding="utf-8") as f:
            f.write(eval_html(summaries, title=f"pallasite eval {args.folder}"))
        print(f"report: {args.report}", file=sys.stderr)
    return 0

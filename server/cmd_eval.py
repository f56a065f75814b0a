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
speedup, the share improved and fast_p; ``--json`` and ``--report`` write the summary as JSON and as
one self-contained HTML file. Exit status: 0 evaluated, 1 a correct task without a timing, 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, Callable

METHODS = ("files", "reference")


def add_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    parser.add_argument("folder", help="a folder of task folders (JAXBench benchmark/, MaxKernel tasks)")
    parser.add_argument("--method", action="append", choices=METHODS,
                        help="what to evaluate (repeatable; default: files)")
    parser.add_argument("--target", default="v6e", help="the chip the candidates are compiled (tiers 0-2) and estimated for")
    parser.add_argument("--jobs", type=int, default=1, help="tasks evaluated at once (job workers)")
    parser.add_argument("--no-verify", action="store_true",
                        help="skip the guarded test (then no task counts as correct: 'not verified')")
    parser.add_argument("--tasks", help="only tasks whose name contains this text")
    parser.add_argument("--json", help="write the summaries here as JSON")
    parser.add_argument("--report", help="write a self-contained HTML report here")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per worker request")
    parser.add_argument("--memory-mb", type=int, default=8192,
                        help="memory limit of each worker (interpret-mode checks of big kernels need several GiB)")
    from .cmd_search import add_backend_arguments

    add_backend_arguments(parser)


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
    lines.append(f"  wall time {s['wall_s']:.1f} s")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from pallasite.agents.eval_job import EvalJob, run_eval
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
            return await run_eval(EvalJob(tasks, methods, chip=args.target, jobs=args.jobs, verify=not args.no_verify,
                                          timeout_s=args.timeout, memory_mb=args.memory_mb, device=device, where=where_,
                                          allow_unconfined=args.allow_unconfined,
                                          progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True)))
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
            json.dump({"version": 2, "methods": summaries}, f, indent=1)  # 2: verdicts, no candidate, refusals
    if args.report:
        from pallasite.server.report_html import eval_html

        with open(args.report, "w", encoding="utf-8") as f:
            f.write(eval_html(summaries, title=f"pallasite eval {args.folder}"))
        print(f"report: {args.report}", file=sys.stderr)
    return 0

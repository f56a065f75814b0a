"""The seed's metrics over the JAXBench tasks of a local checkout, outside CI.

    python benchmarks/bench_eval_jaxbench.py /path/to/accelerator-agents/JAXBench/benchmark --target v5e

A scripted provider answers each task with its hand-tuned kernel (``optimized.py``) where the
checkout has one and with the reference (``baseline.py``) otherwise, and ``pallasite eval``'s
evaluation (agents/eval_job.py) runs over every task with the rules every command shares: a task
answered with its reference is "no candidate" (failed); "compiled" is the checker's tiers 0-2 for
the chip (libtpu, deviceless); "correct" is the ``time`` op's integrity checks in TPU interpret
mode on CPU at reduced shapes; no device here, so the speedup (XLA's estimate of the reference
over the cost model's of the kernel: two models) is refused and the reason printed. With
``--backend local|ssh|ray`` on a TPU, device medians of each candidate against its reference.
Prints the metrics, how many tasks had a candidate, per-task rows and the wall time; ``--report``
writes the HTML report; ``--limit 3`` is a smoke run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?", default=os.environ.get("JAXBENCH_DIR"))
    ap.add_argument("--target", default="v5e")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--memory-mb", type=int, default=8192)
    ap.add_argument("--report")
    ap.add_argument("--json")
    ap.add_argument("--limit", type=int, help="only the first N tasks (a smoke run)")
    from pallasite.server.commands import flags

    flags.add_backend(ap, "eval")  # --backend estimate|local|ssh|ray: device medians instead of estimates
    args = ap.parse_args()
    if not args.folder:
        print("give the JAXBench benchmark folder (or set JAXBENCH_DIR)", file=sys.stderr)
        return 2

    from pallasite.agents.llm.providers import ModelRequest, ProviderConfig
    from pallasite.agents.llm.providers_scripted import ScriptedProvider
    from pallasite.engine.eval_tasks import discover
    from pallasite.agents.eval_job import EvalJob, run_eval
    from pallasite.server.commands.cmd_eval import format_summary  # the rendering only

    from pallasite.agents.run_setup import device_where
    from pallasite.server.run_request import device_settings

    try:
        settings = device_settings(args)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    tasks = discover(args.folder)[:args.limit] if args.limit else discover(args.folder)
    answers = {}
    for t in tasks:
        with open(t.candidate_path or t.reference_path, encoding="utf-8") as f:
            answers[t.name] = f.read()
    provider = ScriptedProvider(ProviderConfig(name="scripted"), [answers[t.name] for t in tasks])

    async def ask(task):  # one call per task, in task order (jobs=1 keeps the queue aligned)
        reply = await provider.complete(ModelRequest(system="optimize", prompt=task.name))
        return reply.text

    if args.jobs != 1:
        print("the scripted provider answers in order: use --jobs 1", file=sys.stderr)
        return 2
    hand = sum(1 for t in tasks if t.candidate_path)
    how = f"estimates for {args.target}" if settings is None else f"timed on {device_where(settings)}"
    print(f"{len(tasks)} tasks, {hand} with a hand-tuned kernel; {how}", file=sys.stderr)
    started = time.monotonic()

    # the device is the engine's pool for these settings (engine/workers/device.py), opened and closed by run_eval
    [summary] = asyncio.run(run_eval(EvalJob(tasks, {"hand-tuned-or-reference": ask}, chip=args.target, jobs=1,
                                             memory_mb=args.memory_mb, device=settings,
                                             where=device_where(settings) if settings is not None else "",
                                             progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))))
    print(format_summary(summary))
    for row in summary["per_task"]:
        if row["candidate"]:
            print(f"  {row['task']}: {row['status']}, speedup={row['speedup']} [{row['provenance']}] "
                  f"{row['verdict']['evidence'][:200]}")
    print(f"tasks without a candidate (failed, 1.0x): {summary['tasks'] - summary['with_candidate']}")
    print(f"wall time {time.monotonic() - started:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    if args.report:
        from pallasite.server.reports.report_html import eval_html

        with open(args.report, "w") as f:
            f.write(eval_html([summary], title=f"JAXBench: hand-tuned kernels where they exist ({how})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

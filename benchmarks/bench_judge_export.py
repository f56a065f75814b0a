"""What the one judging path costs per candidate on CPU (issue 49), to set beside the round trip it replaced.

Runs model-written ``time`` requests (tests/data/judge_export/right.py against the user's
tests/data/optimize/add.py) through a confined worker, as the commands send them:

- ``judged (optimize)``: what optimize, search and eval send per candidate without a device: the
  exported program tested at the judge's sizes and priced by the cost model for v6e (``shrink`` +
  ``chip``; nothing timed);
- ``judged + timed``: the same program also timed ``--runs`` rounds against the reference by the
  judge's clock (what ``pallasite time`` asks).

Each request: a fresh interpreter for the candidate's process (import, trace, export), a fresh verifier
process (deserialize, check, compile), then the judge's comparisons. Prints the median and p90 wall time
per request and the parts the judge reports (``checks.export``), with the machine's load. To compare
with the round trip of an earlier commit, run that commit's own copy of this script in a checkout of it
(``--label``): docs/timing.md gives both, measured back to back. CPU only: no figure here is TPU time.

    .venv/bin/python benchmarks/bench_judge_export.py [--repeats 6] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USER = ROOT / "tests" / "data" / "optimize" / "add.py"
CANDIDATE = ROOT / "tests" / "data" / "judge_export" / "right.py"
PATHS = {"judged (optimize)": {"shrink": True, "chip": "v6e"}, "judged + timed": {}}


async def measure(name: str, repeats: int, runs: int) -> tuple[list[float], list[dict]]:
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.engine.timing import TaskFiles, time_request

    user, text = USER.read_text(), CANDIDATE.read_text()
    params = dataclasses.replace(time_request(TaskFiles(str(USER)), "time", runs=runs, warmup=1, text=text,
                                              trusted=(str(USER), user)), **PATHS[name])
    walls, parts = [], []
    async with WorkerClient(WorkerConfig(confine=True, timeout_s=600)) as worker:
        await worker.request(params)  # the first: imports, caches
        for _ in range(repeats):
            started = time.perf_counter()
            reply = await worker.request(params)
            walls.append(time.perf_counter() - started)
            if not reply.ok or reply.result.verdict != "ok":
                raise SystemExit(f"{name}: {reply.message or reply.result}")
            parts.append(dict(reply.result.checks.get("export") or {}))
    return walls, parts


def p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--runs", type=int, default=5, help="timed rounds per timed request")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average before {os.getloadavg()[0]:.2f}")
    for name in PATHS:
        walls, parts = asyncio.run(measure(name, args.repeats, args.runs))
        print(f"{name:>18}: median {statistics.median(walls):.2f} s, p90 {p90(walls):.2f} s per request "
              f"({args.repeats} requests{'' if PATHS[name] else f', {args.runs} timed rounds each'})")
        candidate = statistics.median(float(p.get("candidate_s") or 0.0) for p in parts)
        symbolic = sum(1 for p in parts if p.get("symbolic"))
        print(f"{'':>20}the candidate's process (start, import, trace + export) as the judge waited: "
              f"{candidate:.2f} s; one symbolic module in {symbolic}/{len(parts)} requests")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

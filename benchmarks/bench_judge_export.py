"""What judging a candidate from its exported program costs (issue 42, part B), against today's paths.

Runs the same model-written ``time`` request (tests/data/judge_export/right.py against the user's
tests/data/optimize/add.py; ``--runs`` timed rounds each) through:

- ``in-process``: a trusted worker, everything in its one process (what a device worker did for
  model-written code before: the candidate judged and timed itself);
- ``round trip``: a confined worker on CPU today (the judge compares and clocks the candidate's calls
  in a second process);
- ``exported``: a confined worker asked for the exported program (``judge="export"``; what a device
  or a stand-in device worker does): trace + serialize in the candidate's process, deserialize +
  compile + run + time in the judge.

    .venv/bin/python benchmarks/bench_judge_export.py [--repeats 6] [--runs 5]

Prints the median and p90 wall time per request for each path, and for the exported path the
median of its parts as the worker reported them (``checks.export``), plus the machine's load. CPU
only: no figure here is TPU time.
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
PATHS = {"in-process": (False, "auto"), "round trip": (True, "auto"), "exported": (True, "export")}


async def measure(name: str, repeats: int, runs: int) -> tuple[list[float], list[dict]]:
    from pallasite.engine.client import WorkerClient, WorkerConfig
    from pallasite.engine.timing import TaskFiles, time_request

    confine, judge = PATHS[name]
    user, text = USER.read_text(), CANDIDATE.read_text()
    params = dataclasses.replace(time_request(TaskFiles(str(USER)), "time", runs=runs, warmup=1, text=text,
                                              trusted=(str(USER), user) if confine else None), judge=judge)
    walls, parts = [], []
    async with WorkerClient(WorkerConfig(confine=confine, timeout_s=600)) as worker:
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
    parser.add_argument("--runs", type=int, default=5, help="timed rounds per request")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average before {os.getloadavg()[0]:.2f}")
    medians = {}
    for name in PATHS:
        walls, parts = asyncio.run(measure(name, args.repeats, args.runs))
        medians[name] = statistics.median(walls)
        print(f"{name:>11}: median {medians[name]:.2f} s, p90 {p90(walls):.2f} s per request "
              f"({args.repeats} requests, {args.runs} timed rounds each)")
        if name == "exported":
            def part(key: str, field: str) -> float:
                return statistics.median(float((p.get(key) or {}).get(field) or 0.0) for p in parts)

            print(f"             candidate's process (import, program checks, trace + serialize both shapes, "
                  f"as the judge waited): {statistics.median(p['candidate_s'] for p in parts):.2f} s")
            for key in ("shapes", "extra"):
                print(f"             {key}: trace + serialize {part(key, 'trace_serialize_s'):.3f} s, "
                      f"{part(key, 'bytes'):.0f} bytes; judge deserialize + check + compile "
                      f"{part(key, 'judge_deserialize_compile_s'):.3f} s")
    print(f"exported vs round trip: {medians['exported'] - medians['round trip']:+.2f} s per request; "
          f"vs in-process: {medians['exported'] - medians['in-process']:+.2f} s")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""What a fresh sandboxed process per candidate costs (issue 38's figure; target: < 0.5 s added per
candidate after the first).

Runs the same requests through a warm trusted worker (everything in one warm process) and through a
confined worker (each request forked by its fork server, a sandbox built from nothing, and
for ``time`` a second process for the candidate while the judge compares), on this machine's CPU:

    .venv/bin/python benchmarks/bench_sandbox.py [--repeats 8]

Prints the median and p90 wall time per request for each (and the worker's start-up to its handshake), and
the difference. Run it with ``PYTHONPATH`` at another checkout to measure that code. CPU interpret mode
only: no figure here is TPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ADD = ROOT / "tests" / "data" / "optimize" / "add.py"


async def measure(confine: bool, repeats: int) -> dict[str, list[float]]:
    from pallasite.engine.client import WorkerClient, WorkerConfig
    from pallasite.engine.sources import sources_for
    from pallasite.engine.timing import TaskFiles, time_request
    from pallasite.wire.messages import CheckParams

    text = ADD.read_text()
    out: dict[str, list[float]] = {"check (tiers 1)": [], "time (correctness, shrink)": [], "worker start-up": []}
    started = time.perf_counter()
    async with WorkerClient(WorkerConfig(confine=confine, timeout_s=300)) as worker:
        out["worker start-up"].append(time.perf_counter() - started)  # to its handshake
        await worker.request(time_request(TaskFiles(str(ADD)), "time", runs=1, warmup=1, text=text,
                                          trusted=(str(ADD), text)))  # the first: imports, caches
        for _ in range(repeats):
            started = time.perf_counter()
            reply = await worker.request(CheckParams(source=sources_for(str(ADD), text), tiers=(1,)))
            assert reply.ok, reply.message
            out["check (tiers 1)"].append(time.perf_counter() - started)
            started = time.perf_counter()
            params = time_request(TaskFiles(str(ADD)), "time", runs=1, warmup=1, text=text, trusted=(str(ADD), text))
            reply = await worker.request(dataclasses.replace(params, shrink=True))
            assert reply.ok and reply.result.verdict == "ok", reply.message or reply.result
            out["time (correctness, shrink)"].append(time.perf_counter() - started)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    from pallasite.engine import spawn

    problem = spawn.confinement_problem(sys.executable)
    if problem:
        print(f"no sandbox here: {problem}")
        return 1
    load = os.getloadavg()
    trusted = asyncio.run(measure(False, args.repeats))
    sandboxed = asyncio.run(measure(True, args.repeats))
    import pallasite

    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; "
          f"pallasite from {os.path.dirname(pallasite.__file__)}")
    print(f"{'request':30} {'warm worker':>22} {'sandboxed, judged':>22} {'added (median)':>15}")
    for name in trusted:
        a, b = trusted[name], sandboxed[name]

        def fmt(xs: list[float]) -> str:
            return f"{statistics.median(xs):6.3f} s (p90 {sorted(xs)[int(0.9 * (len(xs) - 1))]:.3f})"

        print(f"{name:30} {fmt(a):>22} {fmt(b):>22} {statistics.median(b) - statistics.median(a):+13.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
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


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.3f} s (p90 {sorted(xs)[int(0.9 * (len(xs) - 1))]:.3f})"


def hello(send) -> None:
    """A sandboxed child's first message (``start_cost``)."""
    send({"pid": os.getpid()})


def start_cost(repeats: int) -> dict[str, list[float]]:
    """A sandboxed child's start, to its first message: forked by this process (``Sandboxes.start``, what a
    confined worker did before) and by a fork server (what it does now: a request over a socket, the child's
    pipe passed back), alternating."""
    import functools

    import bench_sandbox  # (this file, by its module name: the fork server imports it so)

    from pallasite.runner.isolation import sandbox
    from pallasite.runner.isolation.sandbox_server import ForkServer

    limits = sandbox.Limits(memory_mb=1024, scratch_mb=64)
    here = sandbox.Sandboxes(limits=limits)
    path = os.pathsep.join(p for p in (str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")) if p)
    server = ForkServer.spawned(ForkServer.config(limits, mountpoint=here.mountpoint, preload=("bench_sandbox",)),
                                env={**os.environ, "PYTHONPATH": path})
    out: dict[str, list[float]] = {"forked here": [], "by the fork server": []}
    try:
        for _ in range(repeats):
            for name, start in (("forked here", here.start), ("by the fork server", server.start)):
                started = time.perf_counter()
                child = start(functools.partial(bench_sandbox.hello))
                first = None
                for message in child.messages(time.monotonic() + 60):
                    if first is None and isinstance(message, dict):
                        first = time.perf_counter() - started
                child.outcome()
                out[name].append(first)
    finally:
        server.close()
        os.rmdir(here.mountpoint)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--start-cost", action="store_true",
                        help="also time a sandboxed child's start alone: forked here vs by the fork server")
    args = parser.parse_args()
    from pallasite.engine.workers import spawn

    problem = spawn.confinement_problem(sys.executable)
    if problem:
        print(f"no sandbox here: {problem}")
        return 1
    load = os.getloadavg()
    starts = start_cost(args.repeats * 2) if args.start_cost else None
    trusted = asyncio.run(measure(False, args.repeats))
    sandboxed = asyncio.run(measure(True, args.repeats))
    import pallasite

    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start; "
          f"pallasite from {os.path.dirname(pallasite.__file__)}")
    print(f"{'request':30} {'warm worker':>22} {'sandboxed, judged':>22} {'added (median)':>15}")
    for name in trusted:
        a, b = trusted[name], sandboxed[name]
        print(f"{name:30} {fmt(a):>22} {fmt(b):>22} {statistics.median(b) - statistics.median(a):+13.3f} s")
    for name, xs in (starts or {}).items():
        print(f"a sandboxed child's start to its first message, {name}: {fmt(xs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

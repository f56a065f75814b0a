"""Cold vs warm worker latency: what a warm `pallasite worker` saves per request.

Cold: a new worker process per request (interpreter start, jax + Pallas import, backend start,
handshake, the request, shutdown). Warm: one worker, requests back to back. Ops measured: `ping`
(protocol round trip), `import` of a small kernel file, and `check` (tier 1, tier 2, tiers 1+2)
of a file with three kernels. Also the per-request isolation cost (jax.config/env snapshot and
restore) measured in-process.

Figures are wall-clock seconds on this host, measured with time.perf_counter around
WorkerClient calls: they say how long an editor waits, not how fast any TPU is. The issue's
targets for `check`: warm p95 < 0.5 s and warm at least 5x faster than cold.

    python benchmarks/bench_worker.py [--runs 10] [--cold-runs 3] [--target v5e] [--skip-check]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

from typing import Any

from pallasite.engine.workers.client import WorkerClient, WorkerConfig
from pallasite.engine.sources import sources_for
from pallasite.wire.messages import CheckParams, ImportParams, PingParams

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tests", "data", "worker")
THREE_KERNELS = os.path.abspath(os.path.join(DATA, "three_kernels.py"))
SMALL_FILE = os.path.abspath(os.path.join(DATA, "uses_helper.py"))


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def row(name: str, cold: list[float], warm: list[float]) -> str:
    cm, wm = statistics.median(cold), statistics.median(warm)
    return (f"{name:<28} cold median {cm * 1e3:7.0f} ms  p95 {p95(cold) * 1e3:7.0f} ms | warm median "
            f"{wm * 1e3:7.1f} ms  p95 {p95(warm) * 1e3:7.1f} ms | cold/warm {cm / wm:6.1f}x")


async def measure(params: Any, runs: int, cold_runs: int, config: WorkerConfig) -> tuple[list[float], list[float]]:
    cold = []
    for _ in range(cold_runs):
        t0 = time.perf_counter()
        client = WorkerClient(config)
        reply = await client.request(params)
        cold.append(time.perf_counter() - t0)  # shutdown is not something a user waits for
        await client.close()
        if not reply.ok:
            raise SystemExit(f"{type(params).OP} failed cold: {reply.status}: {reply.message}")
    async with WorkerClient(config) as client:
        first = await client.request(params)  # compile caches, lazy imports of the op
        if not first.ok:
            raise SystemExit(f"{type(params).OP} failed warm: {first.status}: {first.message}")
        warm = []
        for _ in range(runs):
            t0 = time.perf_counter()
            reply = await client.request(params)
            warm.append(time.perf_counter() - t0)
            if not reply.ok:
                raise SystemExit(f"{type(params).OP} failed warm: {reply.status}: {reply.message}")
    return cold, warm


def isolation_cost(runs: int = 200) -> float:
    import jax  # noqa: F401  (the snapshot copies jax.config values)

    from pallasite.runner.worker import Snapshot

    t0 = time.perf_counter()
    for _ in range(runs):
        Snapshot().restore()
    return (time.perf_counter() - t0) / runs


async def main_async(args: argparse.Namespace) -> None:
    config = WorkerConfig(timeout_s=300)
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, python {sys.version.split()[0]}; wall clock, time.perf_counter; "
          f"{args.cold_runs} cold and {args.runs} warm runs each (after one warm-up request)")
    cases = [("ping", PingParams()), ("import small file", ImportParams(source=sources_for(SMALL_FILE)))]
    if not args.skip_check:
        for tiers in ((1,), (2,), (1, 2)):
            name = f"check tiers {'+'.join(map(str, tiers))} (3 kernels)"
            cases.append((name, CheckParams(source=sources_for(THREE_KERNELS), chip=args.target, tiers=tiers)))
    for name, params in cases:
        cold, warm = await measure(params, args.runs, args.cold_runs, config)
        print(row(name, cold, warm), flush=True)
    print(f"isolation (snapshot + restore of jax.config, env, sys.path) per request: "
          f"{isolation_cost() * 1e6:.0f} us (in-process)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="warm requests per case")
    parser.add_argument("--cold-runs", type=int, default=3, help="fresh workers per case")
    parser.add_argument("--target", default="v5e", help="chip for the check cases")
    parser.add_argument("--skip-check", action="store_true", help="only ping and import")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()

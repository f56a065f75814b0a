"""Compiler-tier check times: `Checker.check` per file, through one warm worker.

For each file (the fixed kernels of tests/data/compiler and jax's own kernels in tests/data/real)
and each tier set — (1,) lowering on CPU jaxlib, (2,) the libtpu deviceless compile, (0, 1, 2) the
default — the script prints the median and max wall-clock milliseconds of ``Checker.check`` over
--runs warm runs (worker already started and jax imported), plus the cold first check (worker
start + imports + first compile). Figures are wall clock on this host's CPU (time.perf_counter),
end to end through the worker protocol; no accelerator is involved (the compiler runs
deviceless). Tier 2 is left out when libtpu is not installed.

    python benchmarks/bench_check_tiers.py [--runs 5] [--target v5e]
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import importlib.util
import os
import platform
import statistics
import time

from pallasite.engine.checker import Checker, CheckOptions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def files() -> list[str]:
    fixed = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "compiler", "*_fixed.py")))
    real = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "real", "*.py")))
    return fixed[:8] + real


async def measure(runs: int, target: str) -> None:
    tier_sets: list[tuple[int, ...]] = [(1,), (0, 1, 2)]
    if importlib.util.find_spec("libtpu") is not None:
        tier_sets.insert(1, (2,))
    checker = Checker(CheckOptions(target=target, time_limit_s=300.0))
    try:
        first = files()[0]
        t0 = time.perf_counter()
        await checker.check(first, tiers=(1,))
        print(f"cold first check (worker start + jax import + tier 1 of {os.path.basename(first)}): "
              f"{(time.perf_counter() - t0) * 1000:.0f} ms")
        print(f"{'file':<36} " + " ".join(f"{'tiers ' + ','.join(map(str, t)):>22}" for t in tier_sets))
        for path in files():
            cells = []
            for tiers in tier_sets:
                await checker.check(path, tiers=tiers)  # warm this file's imports and caches
                times = []
                for _ in range(runs):
                    t = time.perf_counter()
                    await checker.check(path, tiers=tiers)
                    times.append((time.perf_counter() - t) * 1000)
                cells.append(f"{statistics.median(times):8.0f} (max {max(times):5.0f})")
            print(f"{os.path.basename(path):<36} " + " ".join(f"{c:>22}" for c in cells))
    finally:
        await checker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", default="v5e")
    args = parser.parse_args()
    print(f"host: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}; "
          f"target {args.target}; median (max) ms of {args.runs} warm runs, wall clock")
    asyncio.run(measure(args.runs, args.target))


if __name__ == "__main__":
    main()

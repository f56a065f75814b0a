"""What the results cache costs and saves: warm `Checker.check` times with and without it.

For each file (examples/ and a few jax kernels from tests/data/real) at the default tiers 0-2,
through ONE warm worker (started and jax imported before timing), the script prints the median
wall-clock milliseconds of ``Checker.check`` over --runs runs in three modes:

- no cache: one worker request (tiers 1 and 2 together), as with `pallasite check --no-cache`;
- miss: a store that exists but holds nothing for the file (a fresh one per run, created before
  timing), so the checker asks the worker for tier 1, looks tier 2 up, asks again for tier 2, and
  records both verdicts;
- hit: the same store again: tier 1 is asked for, tier 2 is reused from the store.

"miss - no cache" is the overhead of the two-request design; "no cache - hit" what reuse saves.
Figures are wall clock on this host's CPU (time.perf_counter); the compiler runs deviceless, no
accelerator is involved. Needs libtpu (tier 2).

    python benchmarks/bench_check_cache.py [--runs 5] [--target v6e]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import statistics
import sys
import tempfile
import time

from pallasite.knowledge.store import ResultsStore
from pallasite.engine.checker import Checker, CheckOptions
from pallasite.engine.workers.client import WorkerClient, WorkerConfig
from pallasite.engine.store_cache import StoreCache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ["examples/add.py", "examples/matmul.py", "examples/bad_reshape.py",
         "tests/data/real/matmul_blocked.py", "tests/data/real/flash_attention_causal.py",
         "tests/data/real/megablox_gmm.py"]


async def timed(checker: Checker, path: str) -> float:
    started = time.perf_counter()
    await checker.check(path)
    return (time.perf_counter() - started) * 1000


async def measure(runs: int, target: str) -> None:
    client = WorkerClient(WorkerConfig(timeout_s=300.0))
    options = CheckOptions(target=target, time_limit_s=300.0)
    plain = Checker(options, client=client)
    print(f"host: {platform.machine()}, {os.cpu_count()} CPUs, python {platform.python_version()}; target {target}; "
          f"median of {runs} warm runs, ms (wall clock, Checker.check, tiers 0-2)")
    print(f"{'file':42} {'no cache':>9} {'miss':>9} {'hit':>9} {'miss-no':>9} {'no-hit':>9}")
    try:
        for rel in FILES:
            path = os.path.join(ROOT, rel)
            if not os.path.exists(path):
                continue
            await plain.check(path)  # warm: imports, first compile of this file
            no_cache = [await timed(plain, path) for _ in range(runs)]
            miss = []
            for _ in range(runs):
                with tempfile.TemporaryDirectory() as folder:
                    ResultsStore.open(folder).close()  # the store exists; its schema is made
                    cache = StoreCache(folder)
                    miss.append(await timed(Checker(options, client=client, cache=cache), path))
                    cache.close()
            with tempfile.TemporaryDirectory() as folder:
                cache = StoreCache(folder)
                await Checker(options, client=client, cache=cache).check(path)
                hit = [await timed(Checker(options, client=client, cache=cache), path) for _ in range(runs)]
                cache.close()
            a, b, c = (statistics.median(x) for x in (no_cache, miss, hit))
            print(f"{rel:42} {a:9.1f} {b:9.1f} {c:9.1f} {b - a:+9.1f} {a - c:+9.1f}")
    finally:
        await client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", default="v6e")
    args = parser.parse_args()
    if importlib.util.find_spec("libtpu") is None:
        print("libtpu is not installed: tier 2 cannot run, nothing to reuse (jax's tpu extra at the installed jax version)")
        return 1
    asyncio.run(measure(args.runs, args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())

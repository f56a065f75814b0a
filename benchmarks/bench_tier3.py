"""Tier-3 time per runtime fixture: TPU interpret mode on this CPU (NOT TPU time).

    python benchmarks/bench_tier3.py [FIXTURE.py ...]

Runs each fixture of tests/data/runtime/ (or the files given) through runner/tier3/interpret.py in this
process and prints, per task: the wall-clock seconds of the whole tier (first run plus any
diagnostic reruns), the shapes used, and the findings' codes. Interpret-mode seconds measure this
CPU's simulation of a TPU; they say nothing about how fast the kernel runs on a TPU.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "data" / "runtime"
SKIP = {"too_large.py"}  # needs the worker's memory limit, not a timing subject


def main(argv: list[str]) -> int:
    import jax

    from pallasite.runner.tier3 import interpret
    from pallasite.runner.tasks import tasks_runtime
    from pallasite.runner.loader import user_module

    paths = [Path(p).resolve() for p in argv] or sorted(p for p in FIXTURES.glob("*.py") if p.name not in SKIP)
    print(f"tier 3 (CPU interpret mode, not TPU time) - jax {jax.__version__}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores")
    print(f"{'fixture':32} {'task':10} {'seconds':>8}  {'codes':18} shapes")
    total = 0.0
    for path in paths:
        with user_module(str(path)) as module:
            for task in tasks_runtime.discover(module, str(path)):
                start = time.perf_counter()
                result = interpret.run_tier3(task, str(path))
                wall = time.perf_counter() - start
                total += wall
                codes = ",".join(sorted({e["code"] for e in result["errors"]})) or "-"
                print(f"{path.name:32} {task.name:10} {wall:8.2f}  {codes:18} {result['shapes']}"
                      + (" (shrunk)" if result["shrunk"] else ""))
    print(f"total {total:.2f} s (wall clock in this process, includes tracing; first fixture pays jax warm-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`pallasite check DIR` wall time with one worker vs a pool: what `--jobs N` buys.

Copies at least 20 kernel files that have a task (examples/ and the compiler corpus of
tests/data/compiler, which includes deliberately broken kernels) into a temporary folder and runs
the real command line, `pallasite check DIR --target v5e --tiers 0,1,2 --no-cache --jobs N`, as a
subprocess for each N given (default 1 and 2), --runs times each, alternating so that load on a
shared host hits every N alike. It prints the median wall time per N (time.perf_counter around
the whole process: interpreter start, worker start-ups, every file's tiers 0-2; CPU only, the
compiler runs deviceless) and the speedup against --jobs 1, and checks that every run printed the
same report in the same order (the pool must not reorder or change findings).

    python benchmarks/bench_check_jobs.py [--jobs 1,2] [--runs 2] [--files 24]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def kernel_files(limit: int) -> list[Path]:
    """Kernel files with a task (example_inputs), examples first, then the compiler corpus."""
    found = sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "tests" / "data" / "compiler").glob("*.py"))
    out = [p for p in found if "def example_inputs" in p.read_text(encoding="utf-8", errors="replace")]
    return out[:limit]


def run_check(folder: str, jobs: int) -> tuple[float, str, int]:
    argv = [sys.executable, "-m", "pallasite.server.cli", "check", folder, "--target", "v5e", "--tiers", "0,1,2",
            "--no-cache", "--jobs", str(jobs)]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"pallasite check --jobs {jobs} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return took, done.stdout, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="1,2", help="comma-separated worker counts (default 1,2)")
    parser.add_argument("--runs", type=int, default=2, help="runs per worker count (alternating)")
    parser.add_argument("--files", type=int, default=24, help="how many kernel files (at least 20)")
    args = parser.parse_args()
    jobs = [int(j) for j in args.jobs.split(",")]
    files = kernel_files(args.files)
    if len(files) < 20:
        raise SystemExit(f"only {len(files)} kernel files with a task were found; the benchmark needs 20")
    with tempfile.TemporaryDirectory(prefix="pallasite-jobs-") as tmp:
        folder = os.path.join(tmp, "kernels")
        os.mkdir(folder)
        for path in files:
            shutil.copy(path, os.path.join(folder, path.name))
        print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start, python "
              f"{sys.version.split()[0]}; {len(files)} kernel files, tiers 0-2 for v5e, --no-cache; wall clock of "
              f"the whole `pallasite check` process (time.perf_counter), CPU only (deviceless compile)", flush=True)
        times: dict[int, list[float]] = {j: [] for j in jobs}
        outputs: set[str] = set()
        for run in range(args.runs):
            for j in jobs:
                took, out, code = run_check(folder, j)
                times[j].append(took)
                outputs.add(out)
                print(f"  run {run + 1}: --jobs {j}: {took:.1f} s (exit {code})", flush=True)
        base = statistics.median(times[jobs[0]])
        for j in jobs:
            median = statistics.median(times[j])
            print(f"pallasite check --jobs {j}: median {median:.1f} s over {len(times[j])} run(s); "
                  f"speedup vs --jobs {jobs[0]}: {base / median:.2f}x")
        same = len(outputs) == 1
        print(f"reports identical and in the same order across all runs: {'yes' if same else 'NO'}")
        if not same:
            raise SystemExit(1)


if __name__ == "__main__":
    main()

"""`pallasite check DIR` wall time with one worker vs a pool: what `--jobs N` buys.

Copies at least 20 kernel files that have a task (examples/ and the compiler corpus of
tests/data/compiler, which includes deliberately broken kernels) into a temporary folder and runs
the real command line, `pallasite check DIR --target v5e --tiers 0,1,2 --no-cache --jobs N`, as a
subprocess for each N given (default 1 and 2), --runs times each, alternating so that load on a
shared host hits every N alike. It prints the median wall time per N (time.perf_counter around
the whole process: interpreter start, worker start-ups, every file's tiers 0-2; CPU only, the
compiler runs deviceless) and the speedup against --jobs 1, and checks that every run printed the
same report (the pool must not change findings; the elapsed time in the summary line aside, and the
order of the files, which are printed as they finish). Then one in-process run per N says where the wall time goes: import, worker
start-up with the first file, the other files, closing the workers.

With ``--real``: jax's own kernels of tests/data/real (flash attention, blocked matmul, megablox
gmm, paged attention; 0.2 s each after the first, five times the small files), each copied four
times under its own name: 16 files whose work is not dwarfed by a worker's start-up.

With ``--keep-warm SECONDS``: every run is `check --keep-warm SECONDS` (engine/workers/warm_pool.py), after one
run per N that starts the keeper's workers (not counted): what a run costs when the workers of the
last one are still warm.

    python benchmarks/bench_check_jobs.py [--jobs 1,2] [--runs 2] [--files 24] [--real] [--keep-warm 120]
"""

from __future__ import annotations

import argparse
import json
import os
import re
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


def real_files(copies: int = 4) -> list[tuple[Path, str]]:
    """(file, name to copy it as): each kernel of tests/data/real ``copies`` times."""
    found = sorted((ROOT / "tests" / "data" / "real").glob("*.py"))
    return [(p, f"{p.stem}_{n}.py") for n in range(1, copies + 1) for p in found]


def run_check(folder: str, jobs: int, keep_warm: float | None = None) -> tuple[float, str, int]:
    argv = [sys.executable, "-m", "pallasite.server.cli", "check", folder, "--target", "v5e", "--tiers", "0,1,2",
            "--no-cache", "--jobs", str(jobs), *(["--keep-warm", f"{keep_warm:g}"] if keep_warm else [])]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"pallasite check --jobs {jobs} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return took, _without_timing(done.stdout), done.returncode


def _without_timing(report: str) -> str:
    """The report less its elapsed time ("... tiers 0,1,2 in 5.5 s: ..."), which differs every run, its
    findings in a fixed order: the command prints each file's findings as that file finishes, so
    with several workers the files come in the order they finished. Each finding keeps its note and
    help lines (the indented lines below it)."""
    blocks: list[str] = []
    for line in re.sub(r" in \d+(\.\d+)? s:", " in _ s:", report).splitlines(True):
        if blocks and line[:1].isspace():
            blocks[-1] += line
        else:
            blocks.append(line)
    return "".join(sorted(blocks))


PHASES = r'''
import glob, json, sys, time
t0 = time.perf_counter()
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths_sync
imported = time.perf_counter() - t0
stamps = []
check_paths_sync(sorted(glob.glob(sys.argv[1] + "/*.py")), CheckOptions(target="v5e", tiers=(0, 1, 2)),
                 jobs=int(sys.argv[2]), use_store=False, on_report=lambda r: stamps.append(time.perf_counter() - t0),
                 keep_warm_s=float(sys.argv[3]) or None)
print(json.dumps({"import": imported, "first": stamps[0], "last": stamps[-1], "total": time.perf_counter() - t0}))
'''


def phases(folder: str, jobs: int, keep_warm: float | None = None) -> dict:
    """Where one run's wall time goes (the same check through the engine in a fresh process): importing
    pallasite, until the first file's report (worker start-up: its jax and libtpu imports, then that
    file), the other files, and closing the workers."""
    done = subprocess.run([sys.executable, "-c", PHASES, folder, str(jobs), str(keep_warm or 0)], capture_output=True, text=True,
                          timeout=1800, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="1,2", help="comma-separated worker counts (default 1,2)")
    parser.add_argument("--runs", type=int, default=2, help="runs per worker count (alternating)")
    parser.add_argument("--files", type=int, default=24, help="how many kernel files (at least 20)")
    parser.add_argument("--real", action="store_true", help="jax's kernels of tests/data/real, four copies each")
    parser.add_argument("--keep-warm", type=float, default=None, metavar="SECONDS",
                        help="run `check --keep-warm SECONDS`: one run per N first (not counted) starts the keeper's "
                             "workers, the timed runs find them warm")
    args = parser.parse_args()
    jobs = [int(j) for j in args.jobs.split(",")]
    files = real_files() if args.real else [(p, p.name) for p in kernel_files(args.files)]
    if len(files) < (16 if args.real else 20):
        raise SystemExit(f"only {len(files)} kernel files with a task were found; the benchmark needs 20")
    with tempfile.TemporaryDirectory(prefix="pallasite-jobs-") as tmp:
        folder = os.path.join(tmp, "kernels")
        os.mkdir(folder)
        for path, name in files:
            shutil.copy(path, os.path.join(folder, name))
        print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start, python "
              f"{sys.version.split()[0]}; {len(files)} kernel files, tiers 0-2 for v5e, --no-cache; wall clock of "
              f"the whole `pallasite check` process (time.perf_counter), CPU only (deviceless compile)", flush=True)
        times: dict[int, list[float]] = {j: [] for j in jobs}
        outputs: set[str] = set()
        if args.keep_warm:
            for j in jobs:
                took, out, _ = run_check(folder, j, args.keep_warm)
                outputs.add(out)
                print(f"  warm-up (not counted): --jobs {j} --keep-warm {args.keep_warm:g}: {took:.1f} s", flush=True)
        for run in range(args.runs):
            for j in jobs:
                took, out, code = run_check(folder, j, args.keep_warm)
                times[j].append(took)
                outputs.add(out)
                print(f"  run {run + 1}: --jobs {j}: {took:.1f} s (exit {code})", flush=True)
        base = statistics.median(times[jobs[0]])
        for j in jobs:
            median = statistics.median(times[j])
            print(f"pallasite check --jobs {j}: median {median:.1f} s over {len(times[j])} run(s); "
                  f"speedup vs --jobs {jobs[0]}: {base / median:.2f}x")
        for j in jobs:
            p = phases(folder, j, args.keep_warm)
            print(f"  --jobs {j} phases (one in-process run): import {p['import']:.2f} s; worker start-up and first "
                  f"file {p['first'] - p['import']:.2f} s; the other {len(files) - 1} files "
                  f"{p['last'] - p['first']:.2f} s; closing the workers {p['total'] - p['last']:.2f} s; "
                  f"total {p['total']:.2f} s", flush=True)
        print(f"  (only the other files' span divides among workers: start-up, import and close are paid once "
              f"per run; load average {os.getloadavg()[0]:.1f} at the end)")
        same = len(outputs) == 1
        print(f"reports identical across all runs (files in the order they finished aside): {'yes' if same else 'NO'}")
        if not same:
            import difflib

            first, other = sorted(outputs)[:2]
            print("".join(difflib.unified_diff(first.splitlines(True), other.splitlines(True), "one run", "another",
                                               n=0))[:4000])
            raise SystemExit(1)


if __name__ == "__main__":
    main()

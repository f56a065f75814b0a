"""`pallasite tune` on JAXBench's big spaces: wall time and peak memory of the CLI and its workers.

    python benchmarks/bench_tune_jaxbench.py /path/to/accelerator-agents [--tasks 1p_Flash_Attention,...]
        [--chip v5e] [--verify 3] [--estimates N] [--limit-s 600] [--limit-mb 2048]

Takes a checkout of the public AI-Hypercomputer/accelerator-agents repository (nothing of it is
copied into this project). For each task (default: 1p_Flash_Attention, whose ``TUNED_PARAMS`` and
block constants span 3.7e9 configurations), the task folder is copied to a temporary folder and
``nice pallasite tune <task>/optimized.py --target CHIP`` runs there as a user would run it
(results store included, no device: ranked by the cost model, the best checked in interpret mode).
Every 0.2 s the resident memory of the CLI and of each of its descendants (the workers) is read
from /proc (psutil); printed per task: wall time, the peak of their sum, the peak of each
process, the exit status, the report's exploration line and best configuration, and whether the
run stayed within ``--limit-s`` and ``--limit-mb`` (the issue's "10 minutes and 2 GB").
Outside CI (needs the checkout; minutes of CPU).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil


def watch(argv: list[str], cwd: str, env: dict[str, str]) -> dict:
    """Run ``argv``; sample the RSS of it and its descendants until it exits."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak_total, peak_each = 0, {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        total = 0
        try:
            family = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            family = []
        for p in family:
            try:
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            total += rss
            name = "cli" if p.pid == proc.pid else f"worker {p.pid}"
            peak_each[name] = max(peak_each.get(name, 0), rss)
        peak_total = max(peak_total, total)
        time.sleep(0.2)
    out, err = proc.communicate()
    return {"seconds": time.monotonic() - started, "rc": proc.returncode, "peak_total": peak_total,
            "peak_each": peak_each, "out": out, "err": err}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", help="a checkout of AI-Hypercomputer/accelerator-agents")
    parser.add_argument("--tasks", default="1p_Flash_Attention")
    parser.add_argument("--chip", default="v5e")
    parser.add_argument("--verify", type=int, default=3)
    parser.add_argument("--estimates", type=int)
    parser.add_argument("--limit-s", type=float, default=600.0)
    parser.add_argument("--limit-mb", type=float, default=2048.0)
    args = parser.parse_args()
    bench = os.path.join(args.checkout, "JAXBench", "benchmark")
    failed = 0
    for task in args.tasks.split(","):
        with tempfile.TemporaryDirectory(prefix="pallasite-bench-tune-") as tmp:
            folder = os.path.join(tmp, task)
            shutil.copytree(os.path.join(bench, task), folder)
            argv = ["nice", sys.executable, "-m", "pallasite.server.cli", "tune", os.path.join(folder, "optimized.py"),
                    "--target", args.chip, "--verify", str(args.verify)]
            if args.estimates:
                argv += ["--estimates", str(args.estimates)]
            got = watch(argv, tmp, dict(os.environ))
        mb = got["peak_total"] / 2**20
        within = got["rc"] == 0 and got["seconds"] <= args.limit_s and mb <= args.limit_mb
        failed += not within
        lines = got["out"].splitlines()
        print(f"== {task} ({args.chip}, verify {args.verify}): exit {got['rc']}, {got['seconds']:.0f} s wall, "
              f"peak RSS {mb:.0f} MiB (CLI + workers) -> {'within' if within else 'NOT within'} "
              f"{args.limit_s:.0f} s / {args.limit_mb:.0f} MiB")
        each = sorted(got["peak_each"].items())
        print("   per process (peak MiB): " + ", ".join(f"{k} {v / 2**20:.0f}" for k, v in each))
        best_row = [" ".join(ln.split()) for ln in lines if " * " in ln][:1]  # the table's row of the best
        for line in lines[:1] + best_row + [ln for ln in lines if ln.startswith(("best:", "note:"))]:
            print("   " + line)
        if got["rc"] != 0:
            print("   stderr: " + got["err"].strip().splitlines()[-1] if got["err"].strip() else "   (no stderr)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""`pallasite tune` on JAXBench's hand-tuned Pallas kernels: does it end with a configuration tier 2 accepts?

    python benchmarks/bench_tune_jaxbench.py /path/to/accelerator-agents [--tasks 1p_Flash_Attention,...]
        [--chips v5e,v6e] [--verify 0] [--estimates N] [--limit-s 600] [--limit-mb 2048] [--json FILE]

Takes a checkout of the public AI-Hypercomputer/accelerator-agents repository (nothing of it is
copied into this project). For each task (default: the 8 hand-tuned kernels 1p, 2p, 3p, 4p, 6p, 7p,
8p_GEMM, 11p_Megablox_GMM) and each chip, the task folder is copied to a temporary folder and
``nice pallasite tune <task>/optimized.py --target CHIP --format json`` runs there as a user would run
it (a fresh results store, no device: ranked by the cost model, the ranking walked through tier 2 until a
configuration compiles). Every 0.2 s the resident memory of the CLI and of each of its descendants (the
workers) is read from /proc (psutil). Printed per (task, chip): the exit status, the best configuration
(its changes from the file's), whether it passed tier 2, the walk's counts (compiled, rejected by the
compiler, skipped as at least as large as an out-of-VMEM one), the pre-check's rejections, the compiler's
rejections (why, and what it needed against what the pre-check counted), wall time and peak RSS, and
whether the run stayed within ``--limit-s`` and ``--limit-mb`` (the issue's "10 minutes and 2 GiB"); last,
a markdown table of them all. Outside CI (needs the checkout; minutes of CPU per task).
"""

from __future__ import annotations

import argparse
import json
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
    # the outputs go to files: a JSON report is larger than a pipe's buffer, and nothing reads it before the end
    out_f, err_f = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out_f, stderr=err_f, text=True)
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
    proc.wait()
    out_f.seek(0)
    err_f.seek(0)
    out, err = out_f.read(), err_f.read()
    return {"seconds": time.monotonic() - started, "rc": proc.returncode, "peak_total": peak_total,
            "peak_each": peak_each, "out": out, "err": err}


TASKS = ("1p_Flash_Attention,2p_GQA_Attention,3p_MLA_Attention,4p_Sparse_Attention,6p_Paged_Attention,"
         "7p_Ragged_Paged_Attention,8p_GEMM,11p_Megablox_GMM")


def _changes(config, current) -> str:
    now = dict(map(tuple, current or ()))
    return ", ".join(f"{k}={v}" for k, v in config if now.get(k) != v) or "(current)"


def summary(task: str, chip: str, got: dict) -> dict:
    """One row: what the JSON report says, or the error the CLI printed."""
    row = {"task": task, "chip": chip, "rc": got["rc"], "seconds": got["seconds"], "mib": got["peak_total"] / 2**20,
           "best": "-", "tier2": "-", "compiled": 0, "rejected": 0, "skipped": 0, "prechecked": 0, "why": ""}
    out = got["out"]
    try:
        report = json.loads(out[: out.index("\n}\n") + 2]) if "\n}\n" in out else json.loads(out)
    except ValueError:
        err = got["err"].strip().splitlines()
        row["why"] = err[-1][:200] if err else "(no output)"
        return row
    walk = report.get("walk") or {"steps": []}
    steps = walk["steps"]
    row["compiled"] = sum(s["state"] != "skipped" for s in steps)
    row["rejected"] = sum(s["state"] == "rejected" for s in steps)
    row["skipped"] = sum(s["state"] == "skipped" for s in steps)
    row["prechecked"] = sum((report.get("rejected") or {}).values())
    row["space"] = report.get("explored", "")
    if report.get("best") is not None:
        row["best"] = _changes(report["best"], report["current"])
        row["tier2"] = "passed" if (report.get("best_compile") or {}).get("ok") is True else "NOT passed"
    cur = report.get("current_compile") or {}
    row["current"] = "compiles" if cur.get("ok") is True else f"not compiled ({cur.get('why', '?')[:60]})"
    reasons = []
    for s in steps:
        if s["state"] == "rejected":
            r = s["compile"]["why"]
            if s.get("needed") and s.get("counted") is not None:
                r += f" (needed {s['needed'] / 2**20:.2f} MiB of {s['limit'] / 2**20:.2f}; counted {s['counted'] / 2**20:.2f})"
            reasons.append(r)
    row["reasons"] = reasons
    row["audited"] = [f"{_changes(c, report['current'])}: counted {n / 2**20:.2f} MiB; compiler: "
                      f"{'ok' if r['ok'] else r['why']}" for c, n, r in report.get("audited") or ()]
    row["notes"] = report.get("notes", [])
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", help="a checkout of AI-Hypercomputer/accelerator-agents")
    parser.add_argument("--tasks", default=TASKS)
    parser.add_argument("--chips", default="v5e,v6e")
    parser.add_argument("--verify", type=int, default=3, help="tune's --verify (interpret-mode checks; default 3)")
    parser.add_argument("--estimates", type=int)
    parser.add_argument("--limit-s", type=float, default=600.0)
    parser.add_argument("--limit-mb", type=float, default=2048.0)
    parser.add_argument("--audit-precheck", type=int, default=0, metavar="N",
                        help="tune's --audit-precheck: also compile N configurations the VMEM pre-check rejected")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    bench = os.path.join(args.checkout, "JAXBench", "benchmark")
    rows = []
    for task in args.tasks.split(","):
        for chip in args.chips.split(","):
            with tempfile.TemporaryDirectory(prefix="pallasite-bench-tune-") as tmp:
                folder = os.path.join(tmp, task)
                shutil.copytree(os.path.join(bench, task), folder)
                argv = ["nice", sys.executable, "-m", "pallasite.server.cli", "tune", os.path.join(folder, "optimized.py"),
                        "--target", chip, "--verify", str(args.verify), "--format", "json"]
                if args.audit_precheck:
                    argv += ["--audit-precheck", str(args.audit_precheck)]
                if args.estimates:
                    argv += ["--max-estimates", str(args.estimates)]
                got = watch(argv, tmp, dict(os.environ))
            row = summary(task, chip, got)
            row["within"] = row["seconds"] <= args.limit_s and row["mib"] <= args.limit_mb
            rows.append(row)
            print(f"== {task} ({chip}, verify {args.verify}): exit {row['rc']}, best {row['best']} (tier 2: "
                  f"{row['tier2']}), walk: {row['compiled']} compiled, {row['rejected']} rejected, {row['skipped']} "
                  f"skipped; {row['prechecked']} rejected by the pre-check; {row['seconds']:.0f} s, {row['mib']:.0f} MiB "
                  f"-> {'within' if row['within'] else 'NOT within'} {args.limit_s:.0f} s / {args.limit_mb:.0f} MiB",
                  flush=True)
            print(f"   per process (peak MiB): " + ", ".join(f"{k} {v / 2**20:.0f}" for k, v in sorted(got["peak_each"].items())))
            for line in ([f"space: {row.get('space', '')}", f"current configuration: {row.get('current', '-')}"]
                         + [f"compiler rejected: {r}" for r in row.get("reasons", [])]
                         + [f"pre-check rejected, compiled anyway: {a}" for a in row.get("audited", [])]
                         + [f"note: {n}" for n in row.get("notes", [])] + ([f"error: {row['why']}"] if row["why"] else [])):
                print("   " + line[:300], flush=True)
    print("\n| task | chip | exit | best (changes) | tier 2 | compiled / rejected / skipped | pre-check rejected | wall s | peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['task']} | {r['chip']} | {r['rc']} | {r['best'][:60]} | {r['tier2']} | {r['compiled']} / {r['rejected']} / "
              f"{r['skipped']} | {r['prechecked']} | {r['seconds']:.0f} | {r['mib']:.0f} |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r["rc"] == 0 and r["tier2"] == "passed" and r["within"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Tier-0 `analyze()` time on jax's largest Pallas kernel file, splash_attention_kernel.py.

Cold: a fresh Python process that imports pallasite's tier 0 and analyzes the file once (what
`pallasite check FILE` pays for tier 0), measured in that process around import + analyze, and
around analyze alone. Warm: `analyze()` repeated in one process, median and p95 over --runs runs,
three ways: the same text and path again (tier 0 reuses that file's parse tree), a text one small
edit away from the previous one (what the language server pays per keystroke-debounced re-check:
an incremental re-parse), a statement inserted inside a function and removed again at 40 places
(bench_lsp.py's edits where authors edit: the insertions are new texts, each removal an undo), and
no path (a full parse every time). Target: warm < 50 ms.

Figures are wall-clock milliseconds (time.perf_counter) on this host's CPU, plus the warm runs'
process CPU time (time.process_time), which other load on a shared host inflates less; tier 0
never runs the kernel, so no accelerator is involved.

    python benchmarks/bench_tier0.py [--runs 100] [--cold-runs 5] [--file PATH]
    python benchmarks/bench_tier0.py --corpus DIR   # every .py calling pallas_call under DIR:
                                                    # time, sites, findings by code (false-positive hunt)
    python benchmarks/bench_tier0.py --per-rule     # each rule's own process CPU time on the file, over
                                                    # --runs fresh reads (what one rule adds to a re-check)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from pallasite.analysis.rules.apis import jax_root

COLD = r'''
import json, sys, time
t0 = time.perf_counter()
from pallasite.analysis.tier0 import analyze
text = open(sys.argv[1], encoding="utf-8").read()
t1 = time.perf_counter()
result = analyze(text, sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"import_and_analyze": t2 - t0, "analyze": t2 - t1, "sites": len(result.sites),
                  "findings": len(result.findings)}))
'''


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def default_file() -> str | None:
    root = jax_root()
    if root is None:
        return None
    return os.path.join(root, "experimental", "pallas", "ops", "tpu", "splash_attention",
                        "splash_attention_kernel.py")


def corpus(folder: str) -> int:
    """Tier 0 over a folder of real kernels: what it finds there, and how long it takes."""
    from collections import Counter

    from pallasite.analysis.tier0 import analyze

    files, sites, elapsed, codes, errors = 0, 0, 0.0, Counter(), []
    for root, _, names in os.walk(folder):
        for name in sorted(names):
            path = os.path.join(root, name)
            if not name.endswith(".py"):
                continue
            try:
                text = open(path, encoding="utf-8").read()
            except (OSError, UnicodeDecodeError):
                continue
            if "pallas_call" not in text:
                continue
            t0 = time.perf_counter()
            result = analyze(text, path)
            elapsed += time.perf_counter() - t0
            files += 1
            sites += len(result.sites)
            for f in result.findings:
                codes[(f.code, f.severity)] += 1
                if f.severity == "error":
                    errors.append(f"{path}:{f.span.line + 1}: {f.code} {f.message}")
    print(f"{files} files, {sites} pallas_call sites, analyze total {elapsed * 1000:.0f} ms (wall clock)")
    for (code, severity), count in sorted(codes.items()):
        print(f"  {code} {severity:<8} {count}")
    for line in errors:
        print("  " + line[:240])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100, help="warm runs (at least 50)")
    parser.add_argument("--cold-runs", type=int, default=5, help="fresh processes for the cold figure")
    parser.add_argument("--file", default=default_file(), help="kernel file (default: jax's splash attention)")
    parser.add_argument("--corpus", help="instead: analyze every .py under this folder that calls pallas_call")
    parser.add_argument("--per-rule", action="store_true", help="instead: each tier-0 rule's own CPU time on the file")
    args = parser.parse_args()
    if args.corpus:
        return corpus(args.corpus)
    if not args.file or not os.path.exists(args.file):
        print(f"kernel file not found: {args.file!r}; pass --file PATH (is jax installed?)", file=sys.stderr)
        return 2
    text = open(args.file, encoding="utf-8").read()
    if args.per_rule:
        return per_rule(text, args.file, max(args.runs, 20))
    lines = text.count("\n") + 1

    cold_total, cold_analyze = [], []
    for _ in range(args.cold_runs):
        proc = subprocess.run([sys.executable, "-c", COLD, args.file], capture_output=True, text=True, check=True)
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        cold_total.append(data["import_and_analyze"] * 1000)
        cold_analyze.append(data["analyze"] * 1000)

    from pallasite.analysis.tier0 import analyze as analyze_text
    from pallasite.analysis.tier0_state import Tier0State

    state = Tier0State()  # the open document's (the language server's Document owns one)

    def analyze(text: str, path: str | None):  # the way the language server analyses its document
        return analyze_text(text, path, state=state if path is not None else None)

    result = analyze(text, args.file)  # first in-process call (reads the installed jax's exports)
    runs = max(args.runs, 50)
    warm, warm_cpu = timed(lambda i: analyze(text, args.file), runs)
    # what the language server pays after a keystroke: the text differs from the last one by one
    # small edit (a comment line in the middle whose number changes each run), same path
    rows = text.split("\n")
    middle = len(rows) // 2
    edited = ["\n".join(rows[:middle] + [f"# edit {i}"] + rows[middle:]) for i in range(runs)]
    edit, edit_cpu = timed(lambda i: analyze(edited[i], args.file), runs)
    # where authors edit: a statement inserted inside a function, then removed (bench_lsp.py's places);
    # each removal brings back the text analysed just before the insertion (kept: analysis/tier0_memo.py)
    analyze(text, args.file)
    inside = inside_function_texts(text, 40)
    both, both_cpu = timed(lambda i: analyze(inside[i % len(inside)], args.file), len(inside))
    inserted, inserted_cpu = both[0::2], both_cpu[0::2]
    removed, removed_cpu = both[1::2], both_cpu[1::2]
    # the same with Python's cyclic collector off during each analysis, as the language server runs
    # tier 0 (server/tier0_thread.collector_off); three rounds over the 40 places
    off, off_cpu = timed(lambda i: _collector_off(analyze, inside[i % len(inside)], args.file), 3 * len(inside))
    inserted_off, inserted_off_cpu = off[0::2], off_cpu[0::2]
    # no state: every call parses the whole text from scratch
    full, full_cpu = timed(lambda i: analyze(text, None), runs)

    print(f"file: {args.file} ({lines} lines, {len(result.sites)} pallas_call sites, "
          f"{len(result.findings)} findings)")
    print(f"host: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"{os.cpu_count()} CPUs; wall clock (time.perf_counter)")
    print(f"cold  import+analyze  median {statistics.median(cold_total):7.1f} ms  "
          f"p95 {p95(cold_total):7.1f} ms  ({args.cold_runs} fresh processes)")
    print(f"cold  analyze only    median {statistics.median(cold_analyze):7.1f} ms  "
          f"p95 {p95(cold_analyze):7.1f} ms")
    for label, wall, cpu in (("unchanged text", warm, warm_cpu), ("after one edit", edit, edit_cpu),
                             ("inside fn: insertion", inserted, inserted_cpu), ("inside fn: removal", removed, removed_cpu),
                             ("insertion, no collector", inserted_off, inserted_off_cpu),
                             ("no path (full parse)", full, full_cpu)):
        print(f"warm  {label:23s} median {statistics.median(wall):7.1f} ms  p95 {p95(wall):7.1f} ms  "
              f"CPU median {statistics.median(cpu):7.1f} ms  p95 {p95(cpu):7.1f} ms  ({len(wall)} runs)  "
              f"target < 50 ms: {'met' if statistics.median(wall) < 50 else 'NOT met'}")
    print(f"(CPU = process CPU time: less sensitive to other load on a shared host; load average "
          f"{os.getloadavg()[0]:.1f})")
    return 0


def per_rule(text: str, path: str, runs: int) -> int:
    """Each rule's process CPU time over ``runs`` fresh reads of the file (sites, tasks and the context made
    anew each time, as a re-check after an edit makes them; the rules' shared memos are made by whichever
    rule asks first, in the order tier 0 runs them)."""
    from pallasite.analysis import rules, sites as sites_mod, tasks as tasks_mod
    from pallasite.analysis.rules.context import RuleContext
    from pallasite.analysis.source import Source

    times: dict[str, list[float]] = {}
    for _ in range(runs):
        source = Source(text)
        found = sites_mod.find_sites(source)
        ctx = RuleContext(source=source, sites=found, tasks=tasks_mod.find_tasks(source, path), target="v6e")
        for rule in rules.all_rules():
            start = time.process_time()
            list(rule(ctx))
            times.setdefault(rule.__name__, []).append((time.process_time() - start) * 1e3)
    print(f"file: {path}; per rule, process CPU ms over {runs} fresh reads (load average {os.getloadavg()[0]:.1f})")
    for name, values in sorted(times.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {name:30s} median {statistics.median(values):8.3f}  p95 {p95(values):8.3f}")
    return 0


def inside_function_texts(text: str, places: int) -> list[str]:
    """At ``places`` statements of function bodies spread over the file: the text with a statement
    inserted before it, then the text again (as bench_lsp.py edits)."""
    import ast

    lines = text.split("\n")
    starts = sorted({stmt.lineno - 1 for node in ast.walk(ast.parse(text))
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) for stmt in node.body})
    step = max(1, len(starts) // places)
    out = []
    for line in starts[step // 2::step][:places]:
        indent = lines[line][:len(lines[line]) - len(lines[line].lstrip())]
        out += ["\n".join(lines[:line] + [f"{indent}_probe = {line}"] + lines[line:]), text]
    return out


def _collector_off(call, *args):
    """``call(*args)`` under the language server's own collector pause (server/tier0_thread.py)."""
    from pallasite.server.tier0_thread import collector_off

    with collector_off():
        return call(*args)


def timed(call, runs: int) -> tuple[list[float], list[float]]:
    """Wall-clock and process-CPU milliseconds of ``call(i)`` for i in range(runs)."""
    wall, cpu = [], []
    for i in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        call(i)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return wall, cpu


if __name__ == "__main__":
    sys.exit(main())

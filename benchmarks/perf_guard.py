"""Performance guard (CI): each path's time as a ratio to a yardstick measured in the same run on the
same machine; exit 1 when a ratio is over its limit.

A time alone says as much about the machine and its load as about the code; a ratio to work that
moves with the machine does not (or much less): a slower or busier machine stretches both. Paths
and their yardsticks:

- ``tier0``: tier 0 per in-function edit on jax's splash attention (``bench_tier0.py``'s 40 places,
  each a statement inserted into a function: a new text, analysed with the document's state and the
  collector off, as the language server runs it; two rounds) against a tree-sitter parse of the same
  file (no state: the whole text), interleaved; medians of this thread's CPU time;
- ``save``: save-to-verdict, tiers 0, 1 and 2 for v5e of tests/data/lsp/add_ok.py with a new constant
  in its kernel each time (a lowered module tier 2 has not seen: a real compile) through a warm check
  worker (``Engine.check``, no results store), against ``python -c "import jax"`` (wall clock;
  two samples before the path, one after);
- ``judge``: judging one candidate as optimize, search and eval send it (``bench_judge_export.py``'s
  request: tests/data/judge_export/right.py against tests/data/optimize/add.py through a confined
  worker, priced for v6e; the worker warm) against the same yardstick;
- ``check_jobs2``: ``pallasite check`` of examples/'s kernel files with ``--jobs 2``, tiers 0-2 for v5e,
  ``--no-cache`` (the whole process: start-up, workers, every file) against the same yardstick.

The limits (``LIMITS``) were set from repeated runs at different loads with headroom for noise, and
under twice the usual ratio where a 2x slowdown must fail (tier 0): docs/editor-performance.md
("The performance guard") gives the spread they came from and the last figures. A path over its limit
is measured once more and fails only if it is over again (a burst of load on a shared machine fails
nothing alone). A path that cannot run here (no sandbox for the confined worker) is said to be
skipped, with why, and fails nothing.

    python benchmarks/perf_guard.py [--only tier0,save,judge,check_jobs2] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

# the largest ratio each path may show (see the module docstring and docs/editor-performance.md)
LIMITS = {"tier0": 2.0, "save": 0.25, "judge": 2.5, "check_jobs2": 6.0}
PATHS = tuple(LIMITS)


@dataclass
class Figure:
    path: str
    what: str
    value: float  # seconds, the path's median
    yardstick: float  # seconds, the yardstick's median
    yardstick_what: str
    samples: int
    limit: float
    skipped: str = ""  # why the path could not run here

    @property
    def ratio(self) -> float:
        return self.value / self.yardstick if self.yardstick > 0 else float("inf")

    @property
    def over(self) -> bool:
        return not self.skipped and self.ratio > self.limit

    def line(self) -> str:
        if self.skipped:
            return f"{self.path:>11}: skipped ({self.skipped})"
        verdict = "OVER ITS LIMIT" if self.over else "ok"
        return (f"{self.path:>11}: {self.what} {_ms(self.value)} / {self.yardstick_what} {_ms(self.yardstick)} = "
                f"ratio {self.ratio:.2f} (limit {self.limit:g}; {self.samples} samples): {verdict}")


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


# ------------------------------------------------------------------------------------------ tier 0


def tier0(rounds: int = 2) -> Figure:
    """Tier 0 per in-function insertion on splash attention against a tree-sitter parse of it."""
    from bench_tier0 import default_file, inside_function_texts
    from tree_sitter import Parser

    from pallasite.analysis.source import language
    from pallasite.analysis.tier0 import analyze
    from pallasite.analysis.tier0_state import Tier0State

    path = default_file()
    if not path or not os.path.exists(path):
        return Figure("tier0", "", 0, 0, "", 0, LIMITS["tier0"], skipped=f"jax's splash attention not found ({path})")
    text = open(path, encoding="utf-8").read()
    data, parser, state = text.encode("utf-8"), Parser(language()), Tier0State()
    analyze(text, path, state=state, scoped_vmem=16 << 20)
    texts = inside_function_texts(text, 40)
    parses, edits = [], []
    for _ in range(rounds):
        for i in range(0, len(texts), 2):
            started = time.thread_time()
            parser.parse(data)
            parses.append(time.thread_time() - started)
            gc.disable()  # as the language server runs tier 0 (server/tier0_thread.collector_off)
            try:
                started = time.thread_time()
                analyze(texts[i], path, state=state, scoped_vmem=16 << 20)
                edits.append(time.thread_time() - started)
            finally:
                gc.enable()
            analyze(texts[i + 1], path, state=state, scoped_vmem=16 << 20)  # the removal: back to the file
    return Figure("tier0", "tier 0 per in-function edit on splash attention (thread CPU)", statistics.median(edits),
                  statistics.median(parses), "a tree-sitter parse of it", len(edits), LIMITS["tier0"])


# ------------------------------------------------------------------------------ the yardstick


def import_jax() -> float:
    """Wall seconds of ``python -c "import jax"`` (JAX_PLATFORMS=cpu), in a fresh interpreter."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import jax"], env=env, check=True, capture_output=True, timeout=300)
    return time.perf_counter() - started


IMPORT_JAX = 'python -c "import jax"'


def around(measure, before: int = 2, after: int = 1) -> tuple[object, float, int]:
    """``measure()``'s result, with the yardstick's median over samples taken just before and after it."""
    sticks = [import_jax() for _ in range(before)]
    result = measure()
    sticks += [import_jax() for _ in range(after)]
    return result, statistics.median(sticks), len(sticks)


# ------------------------------------------------------------------------------ save to verdict


async def _saves(count: int) -> list[float]:
    from pallasite.engine.checker import CheckOptions
    from pallasite.engine.engine import Engine

    path = str(ROOT / "tests" / "data" / "lsp" / "add_ok.py")
    text = open(path, encoding="utf-8").read()
    line = "    o_ref[...] = x_ref[...] + y_ref[...]"
    assert line in text, "tests/data/lsp/add_ok.py changed: update perf_guard's save path"
    engine = Engine(checks=1, use_store=False)
    options = CheckOptions(target="v5e", tiers=(0, 1, 2))
    took = []
    try:
        for n in range(count + 1):  # the first check starts the worker: not counted
            edited = text.replace(line, f"{line} + {n + 1}.0")
            started = time.perf_counter()
            report = await engine.check(path, options, edited)
            if n:
                took.append(time.perf_counter() - started)
            states = [dict(k.tiers) for k in report.kernels]
            if not states or any(s.get(1) != "ok" or s.get(2) != "ok" for s in states) or report.findings:
                raise SystemExit(f"perf guard: the save path did not check cleanly (kernels {states}, findings "
                                 f"{[f.code for f in report.findings]}, notes {report.notes}); its time would mean nothing")
    finally:
        await engine.close()
    return took


def save(count: int = 8) -> Figure:
    took, stick, sticks = around(lambda: asyncio.run(_saves(count)))
    return Figure("save", "save to verdict (tiers 0-2, v5e, warm worker)", statistics.median(took), stick, IMPORT_JAX,
                  len(took), LIMITS["save"])


# ------------------------------------------------------------------------------ judging a candidate


async def _judged(count: int) -> list[float] | str:
    import dataclasses

    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.engine.timing import TaskFiles, time_request

    user_path = ROOT / "tests" / "data" / "optimize" / "add.py"
    candidate = (ROOT / "tests" / "data" / "judge_export" / "right.py").read_text()
    params = dataclasses.replace(
        time_request(TaskFiles(str(user_path)), "time", runs=3, warmup=1, text=candidate,
                     trusted=(str(user_path), user_path.read_text())), shrink=True, chip="v6e")
    took = []
    async with WorkerClient(WorkerConfig(confine=True, timeout_s=600)) as worker:
        first = await worker.request(params)  # imports, caches: not counted
        if not first.ok:
            return first.message or f"the confined worker answered {first.status}"
        for _ in range(count):
            started = time.perf_counter()
            reply = await worker.request(params)
            took.append(time.perf_counter() - started)
            if not reply.ok or reply.result.verdict != "ok":
                raise SystemExit(f"perf guard: the judged candidate was not judged ok ({reply.message or reply.result}); "
                                 "its time would mean nothing")
    return took


def judge(count: int = 3) -> Figure:
    try:
        took, stick, sticks = around(lambda: asyncio.run(_judged(count)))
    except Exception as exc:  # noqa: BLE001 - a worker that cannot start here is said, not raised
        took, stick, sticks = f"{type(exc).__name__}: {exc}", 0.0, 0
    if isinstance(took, str):
        return Figure("judge", "", 0, 0, IMPORT_JAX, 0, LIMITS["judge"], skipped=f"no confined worker here: {took[:300]}")
    return Figure("judge", "judging one candidate (as optimize sends it, warm confined worker)", statistics.median(took),
                  stick, IMPORT_JAX, len(took), LIMITS["judge"])


# ------------------------------------------------------------------------------ check --jobs 2


def _check_runs(count: int, jobs: int = 2) -> list[float]:
    with tempfile.TemporaryDirectory(prefix="pallasite-guard-") as tmp:
        for path in sorted((ROOT / "examples").glob("*.py")):
            shutil.copy(path, tmp)
        argv = [sys.executable, "-m", "pallasite.server.cli", "check", tmp, "--target", "v5e", "--tiers", "0,1,2",
                "--no-cache", "--jobs", str(jobs)]
        took = []
        for _ in range(count):
            started = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
            took.append(time.perf_counter() - started)
            if done.returncode not in (0, 1):
                raise SystemExit(f"perf guard: pallasite check --jobs {jobs} failed ({done.returncode}):\n"
                                 f"{done.stderr[-2000:]}")
    return took


def check_jobs2(count: int = 2) -> Figure:
    took, stick, sticks = around(lambda: _check_runs(count))
    files = len(list((ROOT / "examples").glob("*.py")))
    return Figure("check_jobs2", f"pallasite check of examples/ ({files} files, --jobs 2, tiers 0-2)",
                  statistics.median(took), stick, IMPORT_JAX, len(took), LIMITS["check_jobs2"])


# ------------------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(PATHS), help=f"comma-separated paths (default all: {', '.join(PATHS)})")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    chosen = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PATHS]
    if unknown:
        parser.error(f"unknown path(s) {', '.join(unknown)}; paths: {', '.join(PATHS)}")
    started = time.perf_counter()
    print(f"perf guard: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"python {sys.version.split()[0]}", flush=True)
    import_jax()  # a first import writes bytecode caches: not a sample
    figures = []
    for name in chosen:
        measure = {"tier0": tier0, "save": save, "judge": judge, "check_jobs2": check_jobs2}[name]
        figure = measure()
        print(figure.line(), flush=True)
        if figure.over:  # once more: a burst of load on a shared machine fails nothing alone
            figure = measure()
            print(f"{'':>11}  measured again: {figure.line().strip()}", flush=True)
        figures.append(figure)
    over = [f for f in figures if f.over]
    print(f"perf guard: {len(figures) - len(over)}/{len(figures)} paths within their limits in "
          f"{time.perf_counter() - started:.0f} s; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump([{**asdict(f), "ratio": f.ratio, "load": os.getloadavg()[0]} for f in figures], handle, indent=1)
    for f in over:
        print(f"perf guard: FAILED: {f.path}'s ratio {f.ratio:.2f} is over its limit {f.limit:g} "
              f"({f.what}: {_ms(f.value)} against {f.yardstick_what}: {_ms(f.yardstick)})")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())

"""The optimize loop on JAXBench's tasks, with each task's hand-tuned Pallas kernel as the implementer's reply.

    python benchmarks/bench_optimize_jaxbench.py /path/to/accelerator-agents [--chip v6e] [--tasks 8p_GEMM,...]

Takes a checkout of the public AI-Hypercomputer/accelerator-agents repository (nothing of it is
copied into this project) and, for every JAXBench task that ships an ``optimized.py``, runs ONE
iteration of pallasite's optimize loop (agents/optimize.py) with a scripted provider whose plan is
"use the hand-tuned kernel" and whose implementer reply is that task's ``optimized.py``. The loop
runs on the frozen JAXBench task (``baseline.py``'s CONFIG / create_inputs / workload):

- compiled: the checker's tiers 0-1 (and 2 when libtpu is installed) in a worker, for ``--chip``;
- correct: tier 3, TPU interpret mode on CPU at reduced shapes, against the task's reference
  (the verify op); "-" when it could not run here (the reason is printed);
- speedup (estimate): XLA's ``optimal_seconds`` for the reference compiled deviceless for the chip,
  over pallasite's cost-model roofline of the candidate, both for ``--chip``. An ESTIMATE from two
  models, not a device time; the seed's harness measured on a TPU.

Prints the seed-style table, then the geometric mean over the tasks with an estimate.
Outside CI (needs the checkout, minutes of CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import sys
import tempfile
import time

from pallasite.agents.optimize import Budgets, PhaseResult, new_run, optimize
from pallasite.agents.providers import ProviderConfig
from pallasite.agents.providers_scripted import ScriptedProvider
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import Engine
from pallasite.engine.sources import sources_for
from pallasite.runner.messages import EstimateParams, VerifyParams


class JaxBenchEvaluator:
    """compile: checker; test: verify op (interpret, reduced shapes); measure: the estimate."""

    def __init__(self, engine: Engine, task_dir: str, chip: str, options: CheckOptions) -> None:
        self.engine, self.task_dir, self.chip, self.options = engine, task_dir, chip, options
        self.path = os.path.join(task_dir, "optimized.py")
        self.method = f"estimate ({chip})"
        self.reference_s: float | None = None
        self.notes: list[str] = []

    def _write(self, source: str) -> str:
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(source)
        return self.path

    async def compile(self, source: str) -> PhaseResult:
        report = await self.engine.check(self._write(source), self.options, source, purpose="job")
        errors = [f for f in report.findings if str(getattr(f.severity, "value", f.severity)) == "error"]
        if errors:
            return PhaseResult(False, f"{errors[0].code}", evidence=errors[0].message[:500])
        return PhaseResult(True, "no errors")

    async def test(self, source: str) -> PhaseResult:
        reply = await self.engine.backend(self.options).request(
            VerifyParams(source=sources_for(self._write(source), source), chip=self.chip), purpose="job",
            timeout_s=self.options.time_limit_s)
        if not reply.ok:
            self.notes.append(f"interpret check did not run: {reply.status} {reply.message[:120]}")
            return PhaseResult(True, f"not verified here ({reply.status})", data={"verified": None})
        state = reply.result.state
        if state == "ok":
            return PhaseResult(True, "interpret mode ok", data={"verified": True})
        if state.startswith("skipped"):
            self.notes.append(f"interpret check {state}")
            return PhaseResult(True, state, data={"verified": None})
        return PhaseResult(False, "interpret mode: wrong", evidence="; ".join(reply.result.problems)[:500])

    async def measure(self, source: str) -> PhaseResult:
        if source != open(self.path, encoding="utf-8").read() and "pallas_call" not in source:
            # the baseline (plain JAX): XLA's own figure for the chip, from the candidate's estimate request
            return PhaseResult(self.reference_s is not None, "XLA optimal_seconds of the reference",
                               seconds=self.reference_s, label=f"estimate ({self.chip}): XLA optimal_seconds")
        reply = await self.engine.backend(self.options).request(
            EstimateParams(source=sources_for(self._write(source), source), chip=self.chip, reference=True, probe=False),
            purpose="job", timeout_s=self.options.time_limit_s)
        if not reply.ok or not reply.result.estimates or not reply.result.estimates[0].seconds:
            why = reply.error.message if reply.error else (reply.result.estimates[0].error if reply.ok and reply.result.estimates else reply.message)
            return PhaseResult(False, "not estimated", evidence=str(why)[:300])
        ref = reply.result.reference or {}
        self.reference_s = ref.get("optimal_seconds")
        est = reply.result.estimates[0]
        return PhaseResult(True, f"{est.seconds * 1e3:.3f} ms", seconds=est.seconds, label=est.label)


async def run_task(task_dir: str, chip: str, memory_mb: int) -> dict:
    work = tempfile.mkdtemp(prefix="pallasite-jaxbench-")
    for name in os.listdir(task_dir):
        if name.endswith(".py"):
            shutil.copy(os.path.join(task_dir, name), work)
    kernel = open(os.path.join(work, "optimized.py"), encoding="utf-8").read()
    baseline = open(os.path.join(work, "baseline.py"), encoding="utf-8").read()
    engine = Engine(use_store=False)
    options = CheckOptions(target=chip, tiers=(0, 1, 2), time_limit_s=600, memory_mb=memory_mb)
    evaluator = JaxBenchEvaluator(engine, work, chip, options)
    provider = ScriptedProvider(ProviderConfig(name="scripted"), [
        "Use the hand-tuned Pallas kernel\nReplace the XLA workload with the task's Pallas kernel.",
        f"```python\n{kernel}```"])
    started = time.monotonic()
    try:
        # the candidate first, so the reference's XLA figure is known for the baseline row
        first = await evaluator.measure(kernel)
        state = new_run(os.path.join(work, "baseline.py"), baseline)
        state.baseline_s, state.baseline_label = evaluator.reference_s, f"estimate ({chip}): XLA optimal_seconds"
        state.method = evaluator.method
        state = await optimize(state, provider, evaluator, Budgets(iterations=1, fix_rounds=0))
    finally:
        await engine.close()
        shutil.rmtree(work, ignore_errors=True)
    it = state.iterations[0]
    verified = next((p for p in it.phases if p["phase"] == "test"), None)
    return {"task": os.path.basename(task_dir), "compiled": any(p["phase"] == "compile" and p["ok"] for p in it.phases),
            "correct": verified["summary"] if verified else "-", "verdict": it.verdict,
            "kernel_s": it.time_s, "reference_s": state.baseline_s, "speedup": state.speedup(),
            "label": f"estimate ({chip})", "seconds": time.monotonic() - started,
            "notes": evaluator.notes + ([it.evidence[:200]] if it.evidence and not it.valid else [])
            + ([] if first.ok else [f"estimate: {first.evidence[:200]}"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", help="a checkout of AI-Hypercomputer/accelerator-agents")
    parser.add_argument("--chip", default="v6e")
    parser.add_argument("--tasks", help="comma-separated task folder names (default: every task with optimized.py)")
    parser.add_argument("--memory-mb", type=int, default=12288, help="the worker's memory limit")
    args = parser.parse_args()
    root = os.path.join(args.checkout, "JAXBench", "benchmark")
    if not os.path.isdir(root):
        print(f"{root}: not found; pass the root of an accelerator-agents checkout", file=sys.stderr)
        return 2
    names = sorted(n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n, "optimized.py")))
    if args.tasks:
        names = [n for n in names if n in args.tasks.split(",")]
    total = len([n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n, "baseline.py"))])
    print(f"JAXBench: {total} tasks, {len(names)} with a hand-tuned Pallas kernel (optimized.py); chip {args.chip}")
    print(f"{'task':<28} {'compiled':<8} {'correct':<28} {'kernel est':>11} {'XLA est':>10} {'speedup (est)':>13}  secs")
    rows = []
    for name in names:
        row = asyncio.run(run_task(os.path.join(root, name), args.chip, args.memory_mb))
        rows.append(row)
        k = f"{row['kernel_s'] * 1e3:.3f}ms" if row["kernel_s"] else "-"
        r = f"{row['reference_s'] * 1e3:.3f}ms" if row["reference_s"] else "-"
        s = f"{row['speedup']:.2f}x" if row["speedup"] else "-"
        print(f"{name:<28} {'yes' if row['compiled'] else 'no':<8} {row['correct'][:28]:<28} {k:>11} {r:>10} {s:>13}  "
              f"{row['seconds']:.0f}", flush=True)
        for note in row["notes"]:
            print(f"    note: {note}")
    speedups = [r["speedup"] for r in rows if r["speedup"]]
    if speedups:
        geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        print(f"compiled {sum(r['compiled'] for r in rows)}/{len(rows)}; geometric-mean speedup {geo:.2f}x over "
              f"{len(speedups)} task(s) -- estimate ({args.chip}): pallasite cost model of the kernel vs XLA's "
              "optimal_seconds of the reference; not a device time")
    return 0


if __name__ == "__main__":
    sys.exit(main())

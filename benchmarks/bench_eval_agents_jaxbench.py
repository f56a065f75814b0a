"""The seed's comparison of methods over JAXBench's tasks, with a scripted model, outside CI.

    python benchmarks/bench_eval_agents_jaxbench.py /path/to/accelerator-agents/JAXBench/benchmark \
        [--target v6e] [--limit 5] [--tasks 8p_GEMM,12p_RMSNorm] [--report eval.html] [--json eval.json]

Runs the five agent methods of ``pallasite eval`` (agents/eval_agents.py: zero-shot best-of-N, auto
with K iterations, parallel N x K, beam W x D, evolve P x G; the seed's knobs by default) over the
tasks of a local JAXBench checkout (nothing of it is copied into this project). The model is
scripted: the planner gets a fixed plan, the implementer answers each task's hand-tuned kernel
(``optimized.py``) where the checkout has one, and otherwise a plausible wrong kernel: the task's own
file whose entry fills each output with zeros in a tiled ``pallas_call`` (8-row blocks by the whole
last dimension: it compiles for most tasks, and the guarded test rejects it). So the table measures pallasite's pipeline,
not a model: every method gets the same answer per task, and the rows differ only where a method's
loop treats the answer differently. Every candidate is scored as ``--method files`` scores a file:
compiled = the checker's tiers 0-2 for the chip (libtpu, deviceless); correct = the ``time`` op's
integrity checks in TPU interpret mode on CPU (reduced shapes); speedup = the reference's estimate
over the candidate's by one model (pallasite roofline v4) for the chip: an ESTIMATE, not a device
time. Prints the seed's table per method side by side, each task's row, the model calls and the
wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

WRONG = '''

# --- a plausible wrong kernel (pallasite's benchmark): every output filled with zeros by a tiled pallas_call ---
import jax as _bench_jax
from jax.experimental import pallas as _bench_pl

_bench_reference = {entry}


def _bench_fill(o_ref):
    o_ref[...] = _bench_jax.numpy.zeros(o_ref.shape, o_ref.dtype)


def _bench_fill_small(o_ref):
    o_ref[...] = _bench_jax.numpy.zeros(o_ref.shape, o_ref.dtype)


def _bench_zeros(shape, dtype):
    # blocks of 8 rows (or the whole dimension) by the whole last dimension; leading dimensions one at a time
    if len(shape) < 2:
        return _bench_pl.pallas_call(_bench_fill_small, out_shape=_bench_jax.ShapeDtypeStruct(shape, dtype))()
    rows = 8 if shape[-2] % 8 == 0 else shape[-2]
    block = (None,) * (len(shape) - 2) + (rows, shape[-1])
    grid = tuple(shape[:-2]) + (shape[-2] // rows,)
    spec = _bench_pl.BlockSpec(block, lambda *ids: tuple(ids) + (0,))
    return _bench_pl.pallas_call(_bench_fill, grid=grid, out_specs=spec,
                                 out_shape=_bench_jax.ShapeDtypeStruct(shape, dtype))()


def {entry}(*args, **kwargs):
    leaves, tree = _bench_jax.tree_util.tree_flatten(_bench_jax.eval_shape(_bench_reference, *args, **kwargs))
    return _bench_jax.tree_util.tree_unflatten(tree, [_bench_zeros(s.shape, s.dtype) for s in leaves])
'''


def wrong_kernel(reference: str) -> str:
    """The task's own file with its entry replaced by a zero-filling ``pallas_call`` (same output shapes)."""
    return reference.rstrip("\n") + "\n" + WRONG.format(entry="workload")


class TaskModel:
    """One task's scripted model: a fixed plan, and the same kernel for every implementer call."""

    name = "scripted"
    model = "scripted (hand-tuned or wrong kernel)"

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.calls = 0

    async def complete(self, request):
        from pallasite.agents.prompts.implementer_prompt import SYSTEM as IMPLEMENTER
        from pallasite.agents.llm.providers import Usage, reply

        self.calls += 1
        text = (f"```python\n{self.kernel}```" if request.system == IMPLEMENTER else
                "Write the task as a Pallas kernel\nBlockSpecs per operand, the reduction axis last.")
        return reply(text, Usage(len(request.prompt) // 4, len(text) // 4, 0, 1), self.name, self.model, 0.0)

    async def close(self) -> None:
        return None


def main() -> int:
    from pallasite.agents.search import SearchOptions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=os.environ.get("JAXBENCH_DIR"))
    ap.add_argument("--target", default="v6e")
    ap.add_argument("--limit", type=int, help="only the first N tasks (a smoke run)")
    ap.add_argument("--tasks", help="comma-separated task names")
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--memory-mb", type=int, default=8192)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--report")
    ap.add_argument("--json")
    args = ap.parse_args()
    if not args.folder or not os.path.isdir(args.folder):
        print("give the JAXBench benchmark folder (or set JAXBENCH_DIR)", file=sys.stderr)
        return 2

    from pallasite.agents.eval_agents import AgentMethod, AgentSpec, ProviderSource
    from pallasite.agents.eval_job import EvalJob, run_eval
    from pallasite.engine.eval_tasks import discover
    from pallasite.server.commands.cmd_eval import format_summary, side_by_side

    tasks = discover(args.folder)
    if args.tasks:
        tasks = [t for t in tasks if t.name in args.tasks.split(",")]
    if args.limit:
        tasks = tasks[:args.limit]
    kernels = {}
    for t in tasks:
        if t.candidate_path:
            with open(t.candidate_path, encoding="utf-8") as f:
                kernels[t.name] = f.read()
        else:
            kernels[t.name] = wrong_kernel(t.reference_text())
    models = {name: TaskModel(text) for name, text in kernels.items()}
    providers = ProviderSource(lambda name: models[name])
    specs = {
        "zero-shot": AgentSpec("zero-shot", samples=args.samples),
        "auto": AgentSpec("auto", iterations=args.iterations),
        "parallel": AgentSpec("parallel", search=SearchOptions(algo="parallel", trajectories=5,
                                                               iterations=args.iterations)),
        "beam": AgentSpec("beam", search=SearchOptions(algo="beam", width=3, depth=3, branches=2)),
        "evolve": AgentSpec("evolve", search=SearchOptions(algo="evolve", population=4, generations=3)),
    }
    methods = {name: AgentMethod(spec, providers, "bench-eval-agents", name) for name, spec in specs.items()}
    hand = sum(1 for t in tasks if t.candidate_path)
    print(f"{len(tasks)} tasks ({hand} answered with their hand-tuned kernel, {len(tasks) - hand} with a wrong "
          f"kernel); estimates for {args.target}; methods: " + "; ".join(s.label() for s in specs.values()),
          file=sys.stderr)
    started = time.monotonic()
    summaries = asyncio.run(run_eval(EvalJob(tasks, methods, chip=args.target, jobs=1, memory_mb=args.memory_mb,
                                             timeout_s=args.timeout,
                                             progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))))
    wall = time.monotonic() - started
    for s in summaries:
        print(format_summary(s))
    print(side_by_side(summaries))
    calls = sum(m.calls for m in models.values())
    print(f"\n{len(tasks)} tasks x {len(specs)} methods; {calls} scripted model calls; wall time {wall:.0f} s "
          f"(2-core machine, no TPU: tiers 0-2 deviceless, tests in interpret mode, estimates for {args.target})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"version": 3, "methods": summaries, "wall_s": wall}, f, indent=1)
    if args.report:
        from pallasite.server.reports.report_html import eval_html

        with open(args.report, "w", encoding="utf-8") as f:
            f.write(eval_html(summaries, title="pallasite eval: agent methods over JAXBench (scripted model)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What an estimate rests on: each kernel's class, and whether the model's rules for that class were checked
out of sample against published TPU times (worker side, plain data).

The model's factors are fitted on published TPU times and checked leave-family-out (benchmarks/
bench_public_timings.py); a kernel of a class those families cover is priced by rules that were checked
against a TPU, any other by rules that were not - and the estimate says which, in words, beside its figure
(``CostEstimate.rests_on``; issue 60). The classes, from what the pricer counted (``kernel_class``):

- "blocked matmul": matmul work on pipelined blocks only (no DMAs of its own, no scalar-prefetch tables, no
  transcendentals) - checked on jax's Pallas matmul guide (TPU v5e) and JAXBench's README GEMM (v6e);
- "block-sparse matmul": the same with scalar-prefetched block indices - checked on jax's block-sparse guide
  (v5e);
- "attention" (matmuls and transcendentals), "manual-DMA kernel" (it copies from HBM itself), "vector
  kernel" (no matmul: element-wise, reductions; bound by HBM bandwidth, whose achieved fraction no published
  point fixes): rules not yet checked against a TPU.

The plain XLA ops around the kernels and an XLA reference rest on XLA's own cycle estimates, checked on its
matmul fusions (runner/program/cost_model.UNCHECKED_CLASSES are the op classes that are not).
"""

from __future__ import annotations

from typing import Any, Sequence

CHECKED = {
    "blocked matmul": "jax's Pallas matmul guide (TPU v5e) and JAXBench's README GEMM (v6e)",
    "block-sparse matmul": "jax's block-sparse guide (TPU v5e)",
}
NOT_CHECKED = "rules not yet checked against a TPU"


def kernel_class(mxu_flops: int, transcendentals: int, dma_copies: int, prefetched: bool) -> str:
    """The class of a kernel from what was counted (see the module docstring)."""
    if dma_copies:
        return "manual-DMA kernel"
    if not mxu_flops:
        return "vector kernel"
    if transcendentals:
        return "attention"
    return "block-sparse matmul" if prefetched else "blocked matmul"


def rests_on(calls: Sequence[Any], values_used: Sequence[str] = ()) -> tuple[str, ...]:
    """The words of ``CostEstimate.rests_on`` for the priced kernels (``calls``: CallCost) and the inputs'
    values the figure was priced for (``values_used``: what they decided, e.g. "the grid's size")."""
    out = []
    for call in calls:
        kind = call.kernel_class or "kernel"
        where = CHECKED.get(kind)
        out.append(f"{call.kernel}: a {kind}, " + (f"rules checked out of sample on {where}" if where else NOT_CHECKED))
    if values_used:
        out.append("priced for these inputs' values: " + "; ".join(sorted(set(values_used)))
                   + " (other values may cost otherwise)")
    return tuple(out)

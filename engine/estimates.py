"""A kernel and its reference, estimated by one model: the one place estimated speedups come from.

The worker's ``estimate`` op (runner/tune_ops.py) prices the kernel under a configuration and the
task's plain-JAX reference with the same cost model (runner/program/cost_model.py ``estimate`` and
``estimate_reference``: the same rates, overheads and assumptions, the model's name carried in
both). ``pair`` puts the two figures side by side under one label, "estimate (<model>, <chip>)",
and their ratio goes through ``analysis.verdict.estimated_speedup`` (the one ``speedup``, over two
estimates), which refuses figures of two different models. Each side carries its interval (the range
the model's leave-family-out error on published TPU times allows, runner/program/cost_model.interval); the
speedup's range divides them (``speedup_interval``), and where it straddles 1.0x the pair says
"measure this on a device" (``caveat``): the model cannot tell which side is faster. ``estimate_pair`` asks a worker for
both. ``eval`` (agents/eval_job.py) and ``tune`` (engine/tuning/tune.py) both use ``pair``, so one file
gets one estimated speedup from either.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..analysis.types import CostEstimate
from ..analysis.verdict import MixedModels, Timing, duration, estimated_speedup
from ..wire.messages import EstimateParams, EstimateResult, Sources


@dataclass(frozen=True)
class PairedEstimate:
    """A kernel's and its reference's estimated seconds by one model; ``why`` says what is missing."""

    kernel_s: float | None
    reference_s: float | None
    label: str  # "estimate (pallasite roofline v5, v5e)"
    why: str | None = None
    reference_bound: str | None = None
    kernel_bound: str | None = None
    # when the kernel's own DMAs could only be bounded (runner/program/mosaic_counts.py): what the speedup then is
    caveat: str | None = None
    # the achieved-efficiency factors each side used, (name, value, where it came from) (runner/program/cost_model.Factors)
    kernel_factors: tuple[tuple[str, Any, str], ...] = ()
    reference_factors: tuple[tuple[str, Any, str], ...] = ()
    # (low, high) seconds each side may be (runner/program/cost_model.interval), None when not known
    kernel_interval: tuple[float, float] | None = None
    reference_interval: tuple[float, float] | None = None
    # what the kernel's figure rests on (CostEstimate.rests_on): each kernel's class and whether its rules were
    # checked against published TPU times ("rules not yet checked against a TPU"), the inputs' values it used
    kernel_rests_on: tuple[str, ...] = ()

    def kernel_method(self) -> str:
        """The kernel's figure in words: the label, the term that bounds it, its range, its factors (a
        Timing's method)."""
        return method_text(self.label, self.kernel_bound, self.kernel_factors, interval=self.kernel_interval,
                           rests_on=self.kernel_rests_on)

    def reference_method(self) -> str:
        return method_text(self.label, self.reference_bound, self.reference_factors, "the reference priced as XLA "
                           "compiles it" if any(n == "xla_cycles_scale" for n, _, _ in self.reference_factors) else "",
                           interval=self.reference_interval)

    @property
    def speedup(self) -> float | None:
        """reference / kernel (None when either is missing; see ``why``)."""
        if self.kernel_s is None or self.reference_s is None:
            return None
        return estimated_speedup(self.reference_s, self.kernel_s, self.label, self.label)

    @property
    def speedup_interval(self) -> tuple[float, float] | None:
        """(low, high) of the speedup: the reference's range over the kernel's (both ends at once)."""
        if self.speedup is None or self.kernel_interval is None or self.reference_interval is None:
            return None
        return (self.reference_interval[0] / self.kernel_interval[1], self.reference_interval[1] / self.kernel_interval[0])

    def kernel_timing(self, chip: str, model: str) -> Timing | None:
        """The kernel's figure as a Timing with its interval (what the judge carries), or None."""
        if self.kernel_s is None:
            return None
        return Timing(self.kernel_s, "estimate", chip, model, self.kernel_method(), interval=self.kernel_interval)

    def reference_timing(self, chip: str, model: str) -> Timing | None:
        if self.reference_s is None:
            return None
        return Timing(self.reference_s, "estimate", chip, model, self.reference_method(),
                      interval=self.reference_interval)


def factors_text(factors: Any) -> str:
    """``mxu_efficiency 0.997, ... (fitted on jax's Pallas matmul guide ...); hbm_efficiency 1 (assumed ...)``."""
    groups: dict[str, list[str]] = {}
    for item in factors or ():
        name, value, why = (list(item) + ["", "", ""])[:3]
        shown = f"{name} {float(value):.4g}" if isinstance(value, (int, float)) else f"{name} {value}"
        groups.setdefault(str(why), []).append(shown)
    return "; ".join(f"{', '.join(names)} ({why})" if why else ", ".join(names) for why, names in groups.items())


def method_text(label: str, bound: str | None, factors: Any, how: str = "",
                interval: tuple[float, float] | None = None, rests_on: Any = ()) -> str:
    parts = [label]
    if bound:
        parts.append(f"{bound}-bound")
    if how:
        parts.append(how)
    if rests_on:
        parts.append("rests on: " + "; ".join(str(r) for r in rests_on))
    if interval:
        parts.append(f"range {duration(interval[0])} to {duration(interval[1])} (the model's error on published "
                     "TPU times it was not fitted on)")
    if factors:
        parts.append("factors: " + factors_text(factors))
    return "; ".join(parts)


def _label(model: str, chip: str) -> str:
    return f"estimate ({model}, {chip})" if model else f"estimate ({chip})"


def pair(kernel: CostEstimate | None, reference: dict[str, Any] | None, chip: str) -> PairedEstimate:
    """The kernel's estimate and the reference's (the ``reference`` of an EstimateResult), checked to
    come from one model. Never raises: a missing or mismatched side is ``why``."""
    model = (kernel.model if kernel is not None else "") or ""
    label = _label(model, chip)
    if kernel is None or kernel.status != "ok" or not kernel.seconds:
        why = (kernel.error if kernel is not None else None) or "no pallas_call was traced"
        return PairedEstimate(None, None, label, f"the kernel has no estimate: {why}"[:500])
    below = below_floor(kernel)
    if below:
        return PairedEstimate(None, None, label, f"the kernel's estimate is {below}"[:500])
    if not reference or reference.get("error") or not reference.get("seconds"):
        why = (reference or {}).get("error") or ("none was made (the task has no reference(), or this run's "
                                                 "estimates all came from the results store)")
        return PairedEstimate(kernel.seconds, None, label, f"the reference has no estimate: {why}"[:500],
                              kernel_bound=kernel.bound, caveat=_caveat(kernel), kernel_factors=tuple(kernel.factors),
                              kernel_rests_on=tuple(kernel.rests_on),
                              kernel_interval=tuple(kernel.interval) if kernel.interval else None)
    ref_label = _label(str(reference.get("model") or ""), str(reference.get("chip") or chip))
    try:
        estimated_speedup(float(reference["seconds"]), kernel.seconds, ref_label, label)
    except MixedModels as exc:
        return PairedEstimate(kernel.seconds, None, label, str(exc)[:500], kernel_bound=kernel.bound,
                              caveat=_caveat(kernel), kernel_factors=tuple(kernel.factors),
                              kernel_rests_on=tuple(kernel.rests_on))
    ref_interval = reference.get("interval")
    paired = PairedEstimate(kernel.seconds, float(reference["seconds"]), label, None,
                            reference_bound=reference.get("bound"), kernel_bound=kernel.bound, caveat=_caveat(kernel),
                            kernel_factors=tuple(kernel.factors), kernel_rests_on=tuple(kernel.rests_on),
                            reference_factors=tuple(tuple(f) for f in reference.get("factors") or ()),
                            kernel_interval=tuple(kernel.interval) if kernel.interval else None,
                            reference_interval=(float(ref_interval[0]), float(ref_interval[1])) if ref_interval else None)
    measure = straddles(paired.speedup_interval)
    if measure:
        paired = replace(paired, caveat="; ".join(c for c in (paired.caveat, measure) if c))
    return paired


def straddles(span: tuple[float, float] | None) -> str | None:
    """"measure this on a device: ..." when an estimated speedup's range holds 1.0x, else None."""
    if span is None or not (span[0] <= 1.0 <= span[1]):
        return None
    return (f"measure this on a device: within the model's measured error the speedup is anywhere from "
            f"{span[0]:.2f}x to {span[1]:.2f}x, so the estimate cannot say which side is faster")


def below_floor(est: CostEstimate) -> str | None:
    """Why an estimate is below the physical floors engine/device_floor.py holds device timings to (its
    kernels' counted matmul FLOPs at the chip's peak, their HBM bytes at the peak bandwidth), or None:
    a model whose factors or counts went wrong never hands out a figure no chip could reach."""
    from .device_floor import PEAK_BF16, implausible_seconds

    kind = next((piece for piece, _ in PEAK_BF16 if piece in est.chip.lower()), est.chip)
    work: dict[str, int] = {}
    for call in est.calls:
        if call.flops_count in ("exact", "lower bound") and call.mxu_flops:
            narrow = any(str(b.dtype).startswith(("int8", "uint8", "float8", "int4", "uint4")) for b in call.blocks)
            dtype = "int8" if narrow else "bfloat16"  # 8-bit operands may run at twice the bf16 rate
            work[dtype] = work.get(dtype, 0) + int(call.mxu_flops)
    checks = {"floor_work": {"mxu_flops": work}} if work else {}
    return implausible_seconds(est.seconds, checks, kind, "estimate")


def _caveat(kernel: CostEstimate) -> str | None:
    """A kernel whose own DMAs or whose work were bounded, not counted: its speedup is a bound too,
    said so (runner/program/mosaic_counts.py)."""
    dmas = {c.dma_count for c in kernel.calls if c.dma_copies and c.dma_count != "exact"}
    work = {c.flops_count for c in kernel.calls if c.flops_count != "exact"}
    said = ([f"the kernel's own DMAs are {_bound_words(dmas)}"] if dmas else []) + \
           ([f"the kernel's work is {_bound_words(work)}"] if work else [])
    if not said:
        return None
    kinds = dmas | work
    if kinds == {"lower bound"}:
        effect = "the speedup is an upper bound"
    elif kinds == {"upper bound"}:
        effect = "the speedup is a lower bound"
    else:
        effect = "the speedup is neither an upper nor a lower bound"
    return "; ".join(said) + ": " + effect


def _bound_words(kinds: set[str]) -> str:
    if kinds == {"lower bound"}:
        return "a lower bound (a while loop counted once)"
    if kinds == {"upper bound"}:
        return "an upper bound (pl.when branches counted every step)"
    return "bounded both ways (while loops counted once, pl.when branches every step)"


def pair_result(result: EstimateResult, index: int = 0) -> PairedEstimate:
    """``pair`` for one configuration of a worker's estimate reply."""
    kernel = result.estimates[index] if len(result.estimates) > index else None
    return pair(kernel, result.reference, result.spec.name)


async def estimate_pair(backend: Any, source: Sources, chip: str, *, entry: str | None = None,
                        config: dict[str, int] | None = None, kinds: dict[str, str] | None = None,
                        timeout_s: float = 300.0, trusted: Sources | None = None,
                        reference: Sources | None = None,
                        ) -> tuple[PairedEstimate, EstimateResult | None, str | None]:
    """Ask a worker for the kernel (under ``config``) and its reference by one model (``trusted``: the
    user's own file, for a model's candidate: the judge estimates the reference from it;
    ``reference``: a separate reference file, a JAXBench baseline.py for a kernel kept elsewhere).
    Returns (pair, the reply's result or None, the worker's error or None)."""
    params = EstimateParams(source=source, chip=chip, reference=True, probe=False, entry=entry,
                            configs=(dict(config),) if config else (), kinds=dict(kinds or {}), trusted=trusted,
                            reference_source=reference)
    reply = await backend.request(params, purpose="job", timeout_s=timeout_s)
    if not reply.ok:
        return PairedEstimate(None, None, _label("", chip), f"the worker could not estimate it: {str(reply.why)[:300]}"), None, str(reply.why)
    return pair_result(reply.result), reply.result, None

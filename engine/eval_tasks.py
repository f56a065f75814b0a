"""Evaluate candidate kernels for a folder of tasks (JAXBench and MaxKernel folders, read as they are).

``discover(root)`` finds the task folders under ``root``: JAXBench (``baseline.py``, plus the
hand-tuned ``optimized.py`` where one exists) and MaxKernel (``kernel_task.yaml``). A *method* is a
function from a task to candidate source (the files as the folder holds them, a model's answer...).
``estimate_candidate`` turns one candidate into a ``TaskOutcome`` without a device:

- a candidate identical to the reference is the reference: 1.0x, labelled so (no estimate needed);
- otherwise the worker traces it and runs the cost model for the chip (``estimate`` op, never a CPU
  timing), and asks XLA for the reference's cost (``optimal_seconds`` for that chip when libtpu can
  compile deviceless, else a roofline from its flops and bytes against the chip table's peaks);
  the speedup is reference estimate / candidate estimate, labelled "estimate (<chip>)";
- with ``verify``, tier 3 runs the candidate in TPU interpret mode against the reference at reduced
  shapes: only a candidate that matched counts as correct; without it correctness is "not verified"
  and the task does not count as correct.

A candidate that traced but whose reference has no cost leaves the speedup missing: the metrics
then refuse to summarize (agents/eval_metrics.MissingTiming) rather than count it as 1.0x.

``time_candidate`` is the same with a device backend: the ``time`` op (with its integrity checks)
times the candidate and the task's reference on the device; the speedup is the reference's device
median over the candidate's, labelled "device (<device kind>)". A timing that is not a device
timing (a CPU-only worker answers interpret/host) or has no median leaves the speedup missing, so
the metrics refuse it too: CPU time never becomes a speedup.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..analysis.types import ChipSpec
from ..wire.messages import EstimateParams, VerifyParams
from .sources import sources_for


@dataclass(frozen=True)
class EvalTask:
    name: str
    folder: str
    layout: str  # "jaxbench" | "maxkernel"
    reference_path: str  # the file whose reference the candidate is held to
    candidate_path: str | None  # the folder's own candidate (JAXBench optimized.py, MaxKernel kernel)

    def reference_text(self) -> str:
        return _read(self.reference_path)


@dataclass(frozen=True)
class CandidateResult:
    """What one evaluation found (converted to agents.eval_metrics.CaseOutcome by the caller)."""

    compiled: bool
    correct: bool
    speedup: float | None
    provenance: str
    error: str | None = None
    seconds: float | None = None  # the candidate's estimate
    reference_seconds: float | None = None


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def discover(root: str) -> list[EvalTask]:
    """Task folders under ``root`` (itself included), sorted by path."""
    root = os.path.abspath(root)
    if not os.path.isdir(root):
        raise ValueError(f"{root}: no such folder (pass a folder of JAXBench or MaxKernel task folders)")
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        name = os.path.relpath(folder, root) if folder != root else os.path.basename(root)
        if "kernel_task.yaml" in files:
            kernels = sorted(f for f in files if f.endswith(".py") and f != "reference.py")
            ref = os.path.join(folder, "reference.py")
            cand = os.path.join(folder, kernels[0]) if len(kernels) == 1 else None
            found.append(EvalTask(name, folder, "maxkernel", ref if os.path.isfile(ref) else cand or ref, cand))
        elif "baseline.py" in files:
            opt = os.path.join(folder, "optimized.py")
            found.append(EvalTask(name, folder, "jaxbench", os.path.join(folder, "baseline.py"),
                                  opt if os.path.isfile(opt) else None))
    if not found:
        raise ValueError(f"{root}: no task folders found (JAXBench: a folder with baseline.py; "
                         f"MaxKernel: a folder with kernel_task.yaml)")
    return sorted(found, key=lambda t: t.name)


def reference_seconds(reference: dict[str, Any] | None, chip: ChipSpec) -> tuple[float | None, str]:
    """The reference's estimated time for the chip and how it was obtained."""
    if not reference or reference.get("error"):
        return None, (reference or {}).get("error", "XLA gave no cost analysis for the reference")
    if reference.get("optimal_seconds"):
        return float(reference["optimal_seconds"]), "XLA optimal_seconds"
    flops, moved = reference.get("flops"), reference.get("bytes_accessed")
    if flops is None and moved is None:
        return None, "XLA's cost analysis had neither flops nor bytes"
    peak_flops = chip.bf16_flops * max(1, chip.device_cores)
    peak_bw = chip.hbm_bytes_per_s
    return max((flops or 0.0) / peak_flops, (moved or 0.0) / peak_bw), "roofline of XLA's flops/bytes"


async def estimate_candidate(backend: Any, task: EvalTask, text: str, chip: str, *, verify: bool = True,
                             timeout_s: float = 300.0, identical_is_reference: bool = True) -> CandidateResult:
    """``identical_is_reference``: a candidate equal to the task's reference file is 1.0x without an
    estimate (JAXBench/MaxKernel, where that file holds only the reference); a native kernel file
    holds both the kernel and its reference(), so a search passes False."""
    label = f"estimate ({chip})"
    if identical_is_reference and text == task.reference_text():
        return CandidateResult(True, True, 1.0, "the reference itself (1.0x by definition)")
    path = task.candidate_path or os.path.join(task.folder, "optimized.py")
    source = sources_for(path, text)
    reply = await backend.request(EstimateParams(source=source, chip=chip, reference=True, probe=False),
                                  purpose="job", timeout_s=timeout_s)
    if not reply.ok:
        return CandidateResult(False, False, None, label, f"the candidate could not be traced: {str(reply.why)[:300]}")
    result = reply.result
    est = result.estimates[0] if result.estimates else None
    if est is None or est.status != "ok" or not est.seconds:
        why = est.error if est is not None else "no pallas_call was traced"
        return CandidateResult(False, False, None, label, f"the cost model could not estimate it: {why}"[:500])
    ref_s, how = reference_seconds(result.reference, result.chip)
    speedup = ref_s / est.seconds if ref_s else None
    provenance = f"{label}: reference by {how}, candidate by the cost model"
    if not verify:
        return CandidateResult(True, False, speedup, provenance, "correctness not verified (--no-verify)",
                               est.seconds, ref_s)
    vreply = await backend.request(VerifyParams(source=source, config={}, chip=chip), purpose="job",
                                   timeout_s=timeout_s)
    if not vreply.ok:
        return CandidateResult(True, False, None, provenance, f"the interpret-mode check failed: {str(vreply.why)[:300]}",
                               est.seconds, ref_s)
    state = vreply.result.state
    if state != "ok":
        problems = "; ".join(vreply.result.problems) or state
        return CandidateResult(True, False, None, provenance, f"interpret mode vs the reference: {problems}"[:500],
                               est.seconds, ref_s)
    error = None if speedup is not None else f"no reference estimate ({how})"
    return CandidateResult(True, True, speedup, provenance, error, est.seconds, ref_s)


async def time_candidate(device: Any, task: EvalTask, text: str, *, where: str = "device",
                         timeout_s: float = 300.0, runs: int = 20) -> CandidateResult:
    """The candidate and its reference timed on ``device`` (an open backend): see the module docstring."""
    from .timing import TaskFiles, device_measurement, time_request

    if text == task.reference_text():
        return CandidateResult(True, True, 1.0, "the reference itself (1.0x by definition)")
    path = task.candidate_path or os.path.join(task.folder, "optimized.py")
    reference = task.reference_path if task.layout == "jaxbench" else None
    files = TaskFiles(path, reference, task.layout if task.layout in ("jaxbench", "maxkernel") else "file")
    params = time_request(files, "time", runs=runs, warmup=2, text=text)
    reply = await device.request(params, purpose="device", timeout_s=timeout_s)
    label = f"device ({where})"
    if not reply.ok:
        return CandidateResult(False, False, None, label, f"the timing run failed on {where}: {str(reply.why)[:300]}")
    result = reply.result
    if result.verdict != "ok":
        tricks = "; ".join(f"{t.trick}: {t.message}" for t in result.rejections) or (result.error or result.verdict)
        return CandidateResult(result.verdict == "rejected", False, None, label,
                               f"the time op's integrity checks: {tricks}"[:500])
    cand, why_c = device_measurement(result, "candidate")
    ref, why_r = device_measurement(result, "reference")
    kind = (result.candidate.device_kind if result.candidate is not None else "") or where
    label = f"device ({kind})"
    if cand is None or ref is None:
        return CandidateResult(True, True, None, label, f"no device timing: {why_c or why_r}"[:500])
    return CandidateResult(True, True, ref.median_ns / cand.median_ns, label, None, cand.median_ns / 1e9,
                           ref.median_ns / 1e9)

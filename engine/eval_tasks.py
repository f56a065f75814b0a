"""The tasks of a folder (JAXBench and MaxKernel folders, read as they are) and the reference's estimate.

``discover(root)`` finds the task folders under ``root``: JAXBench (``baseline.py``, plus the
hand-tuned ``optimized.py`` where one exists) and MaxKernel (``kernel_task.yaml``). A folder with
only the reference has no candidate (``candidate_path`` None): eval reports it as "no candidate".
``reference_seconds`` reads the reference's estimated time for a chip from the worker's ``estimate``
reply (XLA's ``optimal_seconds`` when libtpu compiled it deviceless, else a roofline of XLA's flops
and bytes) and names how it was obtained: the model name its ``Timing`` carries
(analysis/verdict.py), so it is never divided by another model's estimate of the kernel.
The evaluation itself is agents/eval_job.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..analysis.types import ChipSpec


@dataclass(frozen=True)
class EvalTask:
    name: str
    folder: str
    layout: str  # "jaxbench" | "maxkernel"
    reference_path: str  # the file whose reference the candidate is held to
    candidate_path: str | None  # the folder's own candidate (JAXBench optimized.py, MaxKernel kernel)

    def reference_text(self) -> str:
        return _read(self.reference_path)


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

"""The tasks of a folder (JAXBench and MaxKernel folders, read as they are) and the reference's estimate.

``discover(root)`` finds the task folders under ``root``: JAXBench (``baseline.py``, plus the
hand-tuned ``optimized.py`` where one exists) and MaxKernel (``kernel_task.yaml``). A folder with
only the reference has no candidate (``candidate_path`` None): eval reports it as "no candidate".
The evaluation itself is agents/eval_job.py; its estimates of a candidate and of the task's
reference come from one model (engine/estimates.py), the same figures ``tune`` shows.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any



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



def with_kernel(tasks: list[EvalTask], kernel: str) -> list[EvalTask]:
    """The one task of ``tasks`` with ``kernel`` (any file) as its candidate: ``eval TASK --kernel
    FILE`` scores a stand-alone kernel against the task's reference and inputs (a file with only a
    ``workload`` takes the task's ``create_inputs``). ValueError when not exactly one task is named."""
    path = os.path.abspath(kernel)
    if not os.path.isfile(path):
        raise ValueError(f"{kernel}: no such kernel file")
    if len(tasks) != 1:
        names = ", ".join(t.name for t in tasks[:6]) + (" ..." if len(tasks) > 6 else "")
        raise ValueError(f"--kernel needs exactly one task (a task folder, or --tasks NAME); found {len(tasks)}: {names}")
    if tasks[0].layout != "jaxbench":
        raise ValueError(f"{tasks[0].name}: --kernel scores against JAXBench tasks (baseline.py) only for now")
    return [dataclasses.replace(tasks[0], candidate_path=path)]

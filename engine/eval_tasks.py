"""The tasks of a folder (JAXBench and MaxKernel folders, read as they are) and the reference's estimate.

``discover(root)`` finds the task folders under ``root``: JAXBench (``baseline.py``, plus the
hand-tuned ``optimized.py`` where one exists) and MaxKernel (``kernel_task.yaml``). A folder with
only the reference has no candidate (``candidate_path`` None): eval reports it as "no candidate".
The evaluation itself is agents/eval_job.py; its estimates of a candidate and of the task's
reference come from one model (engine/estimates.py), the same figures ``tune`` shows.
"""

from __future__ import annotations

import ast
import atexit
import dataclasses
import os
import shutil
import tempfile
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

    def candidate_text(self) -> str:
        """The folder's own candidate as it is now ("" when it has none or it cannot be read)."""
        try:
            return _read(self.candidate_path) if self.candidate_path else ""
        except OSError:
            return ""


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def discover(root: str) -> list[EvalTask]:
    """Task folders under ``root`` (itself included), sorted by path."""
    root = os.path.abspath(root)
    if os.path.isfile(root):
        raise ValueError(f"{root}: a file; pallasite eval takes a folder of tasks (JAXBench: folders with "
                         "baseline.py; MaxKernel: folders with kernel_task.yaml). For one kernel file: `pallasite time "
                         "FILE` times it against its reference(), `pallasite eval TASK_DIR --kernel FILE` scores it "
                         "against a task")
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
    task = tasks[0]
    if os.path.dirname(path) != os.path.abspath(task.folder) and not _states_inputs(path):
        path = staged_beside_baseline(path, task)
    return [dataclasses.replace(task, candidate_path=path)]


INPUT_FUNCTIONS = ("create_inputs", "example_inputs", "get_inputs")


def _states_inputs(path: str) -> bool:
    """Whether the file defines its own inputs (a task of its own), read without importing it."""
    try:
        tree = ast.parse(_read(path))
    except (SyntaxError, ValueError, OSError):
        return True  # leave it as it is: the check reports the syntax error at its line
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return bool(names & set(INPUT_FUNCTIONS)) or any(n.endswith("_inputs") for n in names)


def staged_beside_baseline(kernel: str, task: EvalTask) -> str:
    """``eval TASK --kernel FILE`` where FILE exports only ``workload(...)`` (docs/task-convention.md,
    JAXBench's own convention) and lives outside the task folder: a folder of links — FILE (under its
    own name), its sibling .py files (its local imports) and the task's ``baseline.py`` — so every
    phase (the compiler tiers, the test, the estimate) finds the task's inputs beside it, as it does for
    a JAXBench ``optimized.py``. Removed when the process ends. Returns the linked FILE's path."""
    folder = tempfile.mkdtemp(prefix=f"pallasite-kernel-{os.path.basename(task.folder)}-")
    atexit.register(shutil.rmtree, folder, True)
    name = os.path.basename(kernel) if os.path.basename(kernel) != "baseline.py" else "kernel.py"
    os.symlink(task.reference_path, os.path.join(folder, "baseline.py"))
    os.symlink(kernel, os.path.join(folder, name))
    home = os.path.dirname(kernel)
    for entry in sorted(os.listdir(home)):
        target = os.path.join(folder, entry)
        if entry.endswith(".py") and not os.path.exists(target):
            os.symlink(os.path.join(home, entry), target)
    return os.path.join(folder, name)


async def vmem_bound(judge: Any, verdict: Any, text: str) -> tuple[Any, Any]:
    """A candidate tier 2 rejects for VMEM still gets its estimate pair when the run estimates (no
    device), labelled as a bound: the program as written does not compile, so its estimate is what it
    would take if its buffers fit — a lower bound on any variant that compiles (smaller blocks mean
    more grid steps and more traffic). (verdict with that timing, the reference's timing) — the verdict
    stays "not compiled" and no speedup is ever divided from it; anything else comes back unchanged."""
    from ..analysis.feasibility import out_of_vmem

    compiled = verdict.compile
    if compiled.ok is not False or not out_of_vmem(compiled.why, compiled.evidence) or \
            getattr(judge, "device", None) is not None:
        return verdict, None
    timed = await judge.time(text)
    if timed.candidate is None:
        return verdict, None
    label = ("a lower bound: tier 2 rejected the kernel for VMEM, so this is the estimate of a program that does "
             "not compile as written (any variant that fits takes at least this long)")
    cand = dataclasses.replace(timed.candidate, method=f"{label}; {timed.candidate.method}")
    return dataclasses.replace(verdict, timing=cand), timed.reference

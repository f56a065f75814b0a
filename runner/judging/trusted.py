"""The trusted side of a judged ``time`` request: the task, its inputs and its reference, loaded from the
user's own file (the request's ``trusted`` Sources; for ``pallasite time`` of the user's own file, that
file itself) or the task's reference file (JAXBench's baseline.py, MaxKernel's reference), before the
candidate's process runs anything. The judge may run this code: it is the user's own, or the task's.
Worker side: imports jax through the loader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Callable


def trusted(params: dict[str, Any], stack: contextlib.ExitStack) -> tuple[Any, Callable[..., Any], Any]:
    """(the task of the trusted file, its reference, its module), loaded before the candidate side runs:
    the request's ``trusted`` file (the user's own), else its ``reference`` file (JAXBench's baseline.py)."""
    from ..tasks import maxkernel, tasks_runtime
    from ..measure import timing
    from ..loader import user_module

    kind = "trusted" if params.get("trusted_path") else "reference" if params.get("reference_path") else ""
    if not kind:
        raise timing.TimingError("the request carries no file of the user's to judge against")
    path, text = os.path.abspath(params[f"{kind}_path"]), params.get(f"{kind}_text")
    module = stack.enter_context(user_module(path, text, params.get(f"{kind}_modules") or ()))
    reference = timing._reference_in(module, params.get("reference_entry"))
    if kind == "reference" and os.path.basename(path) == maxkernel.REFERENCE_FILE and \
            os.path.isfile(os.path.join(os.path.dirname(path), maxkernel.TASK_FILE)):
        tasks = maxkernel.reference_tasks(os.path.dirname(path))  # MaxKernel: the YAML's inputs, computation()
        return tasks[0], tasks[0].reference, module
    tasks = tasks_runtime.discover(module, path, text)
    want = params.get("entry")
    chosen = [t for t in tasks if want is None or t.name == want] or tasks
    if kind == "trusted" and chosen and chosen[0].reference is not None:
        reference = chosen[0].reference
    if reference is None or len(chosen) != 1:
        raise timing.TimingError(f"{os.path.basename(path)} states no single task with a reference to judge against")
    return chosen[0], reference, module


def trusted_prep(params: dict[str, Any], stack: contextlib.ExitStack) -> Any:
    """The trusted side as a ``timing.Prepared`` (its entry is the trusted file's own: the judge reads the
    sizes from it): the user's own file (the request's ``trusted`` one; or, for ``time`` of the user's own
    file in an unconfined worker, the request's file itself, loaded with its task's own reference), else the
    task's reference file."""
    import jax

    from ..measure import timing
    from ..measure.timing_inputs import with_static_inputs
    from . import ACTIVE

    own = params.get("trusted_path") or (None if ACTIVE or params.get("reference_path") else params.get("path"))
    if own:
        kind = "trusted" if params.get("trusted_path") else ""
        mine = {"path": own, "text": params.get(f"{kind}_text" if kind else "text"),
                "modules": params.get(f"{kind}_modules" if kind else "modules"), "entry": params.get("entry"),
                "package": None if kind else params.get("package")}
        prep = stack.enter_context(timing.prepared({k: v for k, v in mine.items() if v is not None}))
        return dataclasses.replace(prep, config={})
    task, reference, module = trusted(params, stack)
    path = os.path.abspath(str(params.get("reference_path")))
    device = jax.devices()[0]  # the judge's backend: on an accelerator it now holds the chip
    reference = with_static_inputs(reference, task.inputs)  # a static size the task makes reaches it as a Python int
    return timing.Prepared(task, module, path, reference, None, {}, jax.default_backend(), device.device_kind)

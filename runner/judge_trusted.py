"""The trusted side of a judged ``time`` request: the task and its reference, loaded from the user's
own file (the request's ``trusted`` Sources) or the task's reference file (JAXBench's baseline.py),
before the candidate's process runs anything. Used by both judges (runner/judge.py, the round trip;
runner/judge_export.py, the exported program). Worker side: imports jax through the loader.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable


def trusted(params: dict[str, Any], stack: contextlib.ExitStack) -> tuple[Any, Callable[..., Any]]:
    """(the task of the trusted file, its reference), loaded before the candidate side runs: the
    request's ``trusted`` file (the user's own), else its ``reference`` file (JAXBench's baseline.py)."""
    from . import tasks_runtime, timing
    from .loader import user_module

    kind = "trusted" if params.get("trusted_path") else "reference"
    if not params.get(f"{kind}_path"):
        raise timing.TimingError("the request carries no file of the user's to judge against")
    path, text = os.path.abspath(params[f"{kind}_path"]), params.get(f"{kind}_text")
    module = stack.enter_context(user_module(path, text, params.get(f"{kind}_modules") or ()))
    reference = timing._reference_in(module, params.get("reference_entry"))
    tasks = tasks_runtime.discover(module, path, text)
    want = params.get("entry")
    chosen = [t for t in tasks if want is None or t.name == want] or tasks
    if kind == "trusted" and chosen and chosen[0].reference is not None:
        reference = chosen[0].reference
    if reference is None or len(chosen) != 1:
        raise timing.TimingError(f"{os.path.basename(path)} states no single task with a reference to judge against")
    return chosen[0], reference

"""Tasks from the pallas_calls a file made when it ran: the zero-configuration path (worker side).

A file that states no task (no ``example_inputs()``, no JAXBench or KernelBench form) is checked at
the shapes its own code uses, in this order:

1. the calls its import made (``runner/recording.py``: top-level code ran with every pallas_call
   recorded, and not run where it asks for no interpreter);
2. else the shapes the client read from its source (``inferred``, ``runner/tasks/tasks_inferred.py``);
3. else, when the file has a ``__main__`` block, the calls that block makes, run as
   ``--script`` runs it (``runner/script_mode.run_main``). It also runs when the import's calls
   left some of the file's ``pallas_call`` expressions unreached;
4. else the calls its callers in the workspace make (``callers``, ``runner/tasks/tasks_callers.py``): its
   tests, benchmarks and the modules that import it.

Each distinct recorded call (same kernel, shapes and parameters counted once; at most
``MAX_CALLS``) becomes a ``RuntimeTask`` applying that pallas_call again, without ``interpret``,
to the recorded shapes; its name is the function holding the call (``#2``, ``#3`` for more calls
from the same function). ``ZeroConfig.note`` is the one line that says where the shapes came from.
"""

from __future__ import annotations

import ast
import linecache
import os
import re
import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..concrete_inputs import ShapesOnly
from ..intercept import RecordedCall
from ..recording import MAX_CALLS, Recording, call_name, dedupe, describe_lines, plural, stand_in_failure
from .task_types import RuntimeTask

_MAIN_BLOCK = re.compile(r"^if\s+__name__\s*==\s*['\"]__main__['\"]\s*:", re.M)


@dataclass
class ZeroConfig:
    """The tasks of a file that states none, where their shapes came from, and what the runs said."""

    tasks: list[RuntimeTask] = field(default_factory=list)
    note: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)  # the __main__ run's failure, if any
    notes: list[str] = field(default_factory=list)


def recorded_tasks(calls: Sequence[RecordedCall], fmt: str, taken: Counter | None = None) -> list[RuntimeTask]:
    """One task per distinct call (``fmt``: "import" or "script"); ``taken`` counts names already used."""
    taken = taken if taken is not None else Counter()
    tasks = []
    for call in dedupe(list(calls)):
        base = call_name(call)
        taken[base] += 1
        shapes = tuple(call.operands or ())
        tasks.append(RuntimeTask(name=base if taken[base] == 1 else f"{base} #{taken[base]}",
                                 entry=call.call_without_interpret(), inputs=ShapesOnly(lambda: shapes, shapes),
                                 format=fmt, line=call.line, call=call))
    return tasks


def zero_config_tasks(module: types.ModuleType, path: str, text: str | None, run: Recording, inferred: Any,
                      target: str, time_limit_s: float | None, elapsed_s: float) -> ZeroConfig:
    """The tasks of a file that states none (see the module docstring; what its callers give is
    ``runner/tasks/tasks_callers.with_callers``'s part)."""
    source = text if text is not None else "".join(linecache.getlines(path))
    name = os.path.basename(path)
    found = ZeroConfig()
    imported = run.applied
    if imported:
        found.tasks = recorded_tasks(imported, "import")
        found.note = (f"shapes from importing {name}: its top-level code made {plural(len(imported), 'pallas_call')} "
                      f"({len(found.tasks)} distinct, at {describe_lines(imported)}), each recorded and checked for "
                      f"{target} at the shapes it was called with, not run")
    elif inferred:
        from .tasks_inferred import inferred_tasks

        found.tasks = inferred_tasks(module, inferred)
        return found  # the client says which lines the shapes came from
    missed = _unreached(source, imported)
    if not _MAIN_BLOCK.search(source) or (imported and not missed):
        return found
    from ..script_mode import run_main, script_budget, script_error_record, stand_in_note

    calls, error = run_main(path, text, script_budget(time_limit_s, elapsed_s))
    known = {c.key() for c in imported}
    fresh = [c for c in calls if c.key() not in known]
    taken = Counter(t.name.split(" #")[0] for t in found.tasks)
    more = recorded_tasks(fresh, "script", taken)[:max(0, MAX_CALLS - len(found.tasks))]
    found.tasks += more
    why = (f"the calls at {', '.join(f'line {line}' for line in missed[:4])} were not reached by the import"
           if imported else "importing it made no pallas_call")
    said = (f"its __main__ block made {plural(len(calls), 'pallas_call')} ({len(more)} {'more ' if imported else ''}"
            f"distinct), each recorded and checked for {target}, not run")
    found.note = (f"{found.note}; and from running {name}'s __main__ block ({why}): {said}" if found.note
                  else f"shapes from running {name}'s __main__ block ({why}): {said}")
    if error is not None and stand_in_failure(error, calls):
        found.notes.append(stand_in_note(error, path, "its __main__ block"))
    elif error is not None:
        rec = script_error_record(error, path, len(calls), len(dedupe(calls)), time_limit_s)
        found.errors.append(rec)
    return found


def _unreached(source: str, calls: Sequence[RecordedCall]) -> list[int]:
    """1-based lines of the file's ``...pallas_call(...)`` expressions no recorded call went through."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    sites = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name.endswith("pallas_call"):
                sites.append((node.lineno, node.end_lineno or node.lineno))
    lines = {line for c in calls for line in c.stack_lines}
    return sorted(first for first, last in sites if not any(first <= line <= last for line in lines))

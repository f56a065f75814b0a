"""A file's call graph, closed over: which functions reach a set of targets through the others.

Plain Python (no tree-sitter, no jax). Used by the source reading of tasks (``analysis/tasks.py``);
the worker's run-time discovery (``runner/tasks/tasks_runtime.py``, which may import only
``analysis.types``) has its own copy of the closure, held to the same answers by a test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def reaching(direct: Iterable[str], calls: Mapping[str, set[str]]) -> set[str]:
    """``direct`` plus every function that calls (by name) one already in the set, to a fixed point."""
    found = set(direct)
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            if name not in found and called & found:
                found.add(name)
                changed = True
    return found

"""The lines of the checked file that a task's kernels were traced from (worker side: imports jax).

Tier 3 reads a kernel's source with ``ast`` to say where an unwritten output's store or an
accumulator's init belongs (``runner/tier3/interpret_places.py``), but the source alone cannot tell
which code ran: a kernel that picks one of two variants (jax's flash attention runs its
single-step body only when one kv block covers the sequence) has stores in both, and a store
under ``if existing_out is not None`` exists only for some callers. ``kernel_lines`` traces the
task's entry once (``jax.make_jaxpr``, nothing runs) and returns the lines of ``path`` named by
the source of every equation inside every ``pallas_call`` kernel, nested bodies (``pl.when``,
loops, ``lax.cond`` branches) included. A statement that leaves no equation (``pass``, a value
the trace drops because nothing uses it) has no line here, so the set says what ran, never what
did not: callers use it to rule out whole functions and stores (effects, never dropped).
"""

from __future__ import annotations

import os
from typing import Any, Callable

import jax

KERNEL_PRIMITIVES = ("pallas_call",)


def kernel_lines(fn: Callable[..., Any], args: tuple[Any, ...], path: str) -> frozenset[int] | None:
    """1-based lines of ``path`` that the kernels ``fn(*args)`` calls were traced from; None when
    the entry does not trace (the caller then rules nothing out)."""
    try:
        closed = jax.make_jaxpr(fn)(*args)
    except Exception:  # noqa: BLE001 - an entry that does not trace: nothing is known
        return None
    target = os.path.realpath(path)
    lines: set[int] = set()
    _walk(closed.jaxpr, False, target, lines)
    return frozenset(lines)


def _walk(jaxpr: Any, inside: bool, target: str, lines: set[int]) -> None:
    from jax._src import core, source_info_util

    for eqn in jaxpr.eqns:
        if inside:
            lines.update(_lines_of(eqn, target, source_info_util))
        below = inside or eqn.primitive.name in KERNEL_PRIMITIVES
        for sub in core.jaxprs_in_params(eqn.params):
            _walk(sub, below, target, lines)


def _lines_of(eqn: Any, target: str, source_info_util: Any) -> set[int]:
    traceback = getattr(eqn.source_info, "traceback", None)
    if traceback is None:
        return set()
    return {frame.start_line for frame in source_info_util.user_frames(traceback)
            if _real(frame.file_name) == target}


def _real(name: str) -> str:
    try:
        return os.path.realpath(name)
    except (OSError, ValueError):
        return name

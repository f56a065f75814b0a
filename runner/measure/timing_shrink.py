"""Reduced shapes for the ``time`` op's correctness checks when no device runs the kernel.

Interpret mode simulates a TPU on the CPU, one grid step at a time: at a task's full size
(JAXBench's attention kernels, large GEMMs) it runs past any sensible time or memory limit. With
``shrink`` set in ``TimeParams`` and no accelerator, the checks run at smaller shapes made by
tier 3's rule (``interpret.shrink_shapes``): only arrays above a million elements shrink, and only
along dims that a BlockSpec cuts into blocks; such a dim becomes two blocks (the grid shrinks, the
block shapes and so the tiling rules stay as written). The second shape is the same rule at four
blocks per dim (or one, when four do not divide the size), so the candidate is still checked at a
shape beyond the first. Both must trace through the candidate and the reference (``eval_shape``,
nothing runs); when they do not, the full shapes are kept and the note says why, unless the
inputs exceed ``MAX_WHOLE_BYTES``: then the op answers an error naming both reasons (a worker
killed at its memory or time limit would say neither).

``reduced(prep, shapes)`` returns a ``Reduced`` or None (nothing to shrink, or shrinking broke the
task). Worker side: imports jax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax

from ..tier3.interpret import _namespaces, describe_shapes, probe_calls, shrink_shapes


MAX_WHOLE_BYTES = 512 << 20  # inputs above this are not run whole in interpret mode (it copies them many times)


def too_big(shapes: tuple[Any, ...]) -> str | None:
    """Why these inputs are too large to run whole in interpret mode, or None: above ``MAX_WHOLE_BYTES``, or
    held by the interpreter (``timing_ladder.PEAK_FACTOR`` times over: copies, NaN fill, upcasts) past the
    check's budget (a third of the worker's memory limit), where the run would meet the worker's limit
    instead of a verdict (JAXBench 3p and 4p: 0.3 GiB of inputs, a worker killed at 8 GiB)."""
    from .timing_ladder import PEAK_FACTOR, budget_bytes

    total = sum(int(a.size) * a.dtype.itemsize for a in jax.tree.leaves(shapes) if hasattr(a, "dtype"))
    if total > MAX_WHOLE_BYTES:
        return (f"the example inputs take {total / 2**30:.2f} GiB (interpret mode runs at most "
                f"{MAX_WHOLE_BYTES >> 20} MiB whole)")
    budget = budget_bytes()
    if PEAK_FACTOR * total > budget:
        return (f"the example inputs take {total / 2**20:.0f} MiB, which interpret mode holds about {PEAK_FACTOR} "
                f"times over ({PEAK_FACTOR * total / 2**30:.1f} GiB), past the check's budget of {budget >> 20} MiB "
                "(a third of the worker's memory limit)")
    return None


@dataclass
class Reduced:
    shapes: tuple[Any, ...]
    extra: tuple[Any, ...] | None
    extra_how: str
    note: str


def _traces(prep: Any, shapes: tuple[Any, ...]) -> str | None:
    """None when the candidate and the reference both trace at these shapes, else why not."""
    for name, fn in (("the candidate", prep.probe()), ("the reference", prep.reference)):
        try:
            jax.eval_shape(fn, *shapes)
        except Exception as exc:  # noqa: BLE001 - the task hard-codes its size somewhere
            return f"{name} does not trace at {describe_shapes(shapes)}: {type(exc).__name__}: {str(exc)[:200]}"
    return None


def reduced(prep: Any, shapes: tuple[Any, ...]) -> Reduced | None | str:
    """Smaller shapes for the checks; None when the inputs are small already; a string (why not)
    when they are large but could not be shrunk."""
    candidate = prep.probe()
    try:
        calls = probe_calls(candidate, shapes, _namespaces(candidate))
    except Exception as exc:  # noqa: BLE001 - the program checks report the candidate's own failure
        return f"the candidate does not trace at the example shapes ({type(exc).__name__})"
    small, changed = shrink_shapes(shapes, calls)
    if not changed:
        large = any(getattr(a, "size", 0) > (1 << 20) for a in jax.tree.leaves(shapes))
        return "no dim of the large inputs is cut into blocks by a BlockSpec" if large else None
    why = _traces(prep, small) or too_big(small)
    if why:
        return why if not why.startswith("the example inputs") else \
            why.replace("the example inputs", "even reduced, the inputs", 1) + " (an operand no BlockSpec cuts stays whole)"
    extra, how = None, "no other reduced shape traces"
    for blocks in (4, 1, 3):
        other, moved = shrink_shapes(shapes, calls, blocks_per_dim=blocks)
        if moved and other != small and _traces(prep, other) is None:
            extra, how = other, f"the example shrunk to {blocks} block(s) per tiled dim: {describe_shapes(other)}"
            break
    note = (f"checked in TPU interpret mode at reduced shapes {describe_shapes(small)} (from "
            f"{describe_shapes(shapes)}: block shapes kept, the grid shrunk to two blocks per tiled dim)")
    return Reduced(small, extra, how, note)

"""Whether the inputs the judge made at a reduced size are still an instance of the task.

A task's file may keep integers that do not follow its CONFIG: JAXBench 7p's query and kv lengths are
module constants summing to 4096 tokens, so at ``max_num_batched_tokens`` 128 its ``cu_q_lens`` run to
4096 past a 128-row query buffer, the reference clamps every late sequence onto row 127 and adds them up,
and any kernel "differs". ``broken_relation`` reads that from the values: an integer input whose largest
value fits within an array extent at the full size (the tightest such extent, as a length or offset
fits the buffer it indexes) and passes every extent of that place at the reduced size breaks a relation
the task held. Then no comparison at that size is a verdict; the judge says so ("not verified").

Worker side: imports jax.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np


def _is_int(leaf: Any) -> bool:
    if isinstance(leaf, bool):
        return False
    if isinstance(leaf, int):
        return True
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and np.issubdtype(np.dtype(dtype), np.integer)


def integer_leaves(values: Any) -> list[np.ndarray | None]:
    """The integer leaves of concrete ``values`` (None at a float leaf)."""
    return [np.asarray(leaf) if _is_int(leaf) else None for leaf in jax.tree.leaves(values)]


def integers_of(inputs: Callable[[], Any] | None) -> list[np.ndarray | None] | None:
    """The integer leaves of ``inputs()`` as values (None at a float leaf), made under ``jax.jit`` so that
    the float arrays' work is dropped (7p's full-size kv pages are 1 GiB); None when it does not trace."""
    if inputs is None:
        return None

    def ints() -> list[Any]:
        return [leaf if _is_int(leaf) else None for leaf in jax.tree.leaves(inputs())]

    try:
        return [None if leaf is None else np.asarray(leaf) for leaf in jax.jit(ints)()]
    except Exception:  # noqa: BLE001 - an inputs function that does not trace: no relation to read
        return None


def broken_relation(full: tuple[Any, ...], reduced: tuple[Any, ...], full_ints: list[Any] | None,
                    reduced_ints: list[Any] | None) -> str | None:
    """Why the reduced inputs are not an instance of the task (see the module docstring), or None.
    ``full`` and ``reduced``: the inputs' shapes at the two sizes; ``*_ints``: integer leaves or None."""
    shapes_full = [tuple(getattr(x, "shape", ())) for x in jax.tree.leaves(full)]
    shapes_reduced = [tuple(getattr(x, "shape", ())) for x in jax.tree.leaves(reduced)]
    if full_ints is None or reduced_ints is None or len(shapes_full) != len(shapes_reduced) \
            or len(full_ints) != len(shapes_full) or len(reduced_ints) != len(shapes_full):
        return None
    extents = [(i, axis, d) for i, shape in enumerate(shapes_full) for axis, d in enumerate(shape)
               if len(shapes_reduced[i]) == len(shape)]
    for k, (at_full, at_reduced) in enumerate(zip(full_ints, reduced_ints)):
        if at_full is None or at_reduced is None or np.size(at_full) == 0 or np.size(at_reduced) == 0:
            continue
        top_full, top_reduced = int(np.max(at_full)), int(np.max(at_reduced))
        bounds = [d for _, _, d in extents if d >= top_full]
        if top_full < 2 or not bounds:
            continue
        tight = min(bounds)
        places = [(i, axis) for i, axis, d in extents if d == tight]
        if all(top_reduced > shapes_reduced[i][axis] for i, axis in places):
            i, axis = places[0]
            return (f"integer input {k} reaches {top_reduced}, past input {i}'s axis {axis} ({shapes_reduced[i][axis]} "
                    f"at this size; {top_full} <= {tight} at the full size): the task's integers (lengths, offsets, "
                    "page tables) do not follow its CONFIG, so the reduced inputs are not an instance of the task")
    return None

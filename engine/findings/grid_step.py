"""A block read past the array's end on the last step of a grid axis, by an index map that hands that
axis's index on: the grid has a step too many there, so the finding belongs at that axis's entry of the grid
(client side, never imports jax).

Tier 3 says "the index_map of input rhs returns block (0, 0, 3) at grid step (3, 0, 0): it reads ... past its
end" at the index map (runner/tier3/interpret_records.py). When one block index of that block equals the step
of exactly one grid axis, and that step is the axis's last (the grid the call ran with,
``ReachedCall.grid``; when an axis's size was traced, the step tier 3 stopped at), the map is following the grid and the grid runs one step too far (``tiles_n + 1``, a
``pl.cdiv`` where the size does not divide): said at the grid's entry for that axis - through a name bound
to the tuple - with the index map related. Anything less clear-cut stays at the map.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ...analysis.types import Related, Span
from .origin_findings import Moved

_PAST = re.compile(r"returns block \((?P<block>[\d,\s]*)\) at grid step \((?P<step>[\d,\s]*)\)")


def to_grid_entry(code: str, rec: Mapping[str, Any], site: Any, reached: Any, text: str,
                  span: Span) -> Moved | None:
    """The finding moved to the grid entry whose last step the index map followed past the array's end."""
    if code != "PLS302" or site is None or getattr(site, "grid_span", None) is None:
        return None
    m = _PAST.search(f"{rec.get('sentence') or ''}")
    if m is None:
        return None
    block, step = _ints(m.group("block")), _ints(m.group("step"))
    grid = _grid_ran(site, reached) or tuple(s + 1 for s in step)  # a grid of traced sizes: tier 3 stops at the
    if len(step) != len(grid):                                       # first step past the end, whichever it is
        return None
    axes = {a for b in block if b > 0 for a, s in enumerate(step) if s == b and s == grid[a] - 1}
    if len(axes) != 1:
        return None
    (axis,) = axes
    place = grid_entry(text, site.grid_span, axis)
    if place is None:
        return None
    return Moved(span=place, related=(Related(span, "the index map that follows this grid axis past the end"),),
                 sentence=f"grid axis {axis} runs to step {step[axis]}, and the index map names block {step[axis]} "
                          f"there: the grid has a step too many on axis {axis} (its entry here)")


_TABLE = re.compile(r"Out-of-bounds read: \[\(?(?P<index>[\d,\s]+)\)?\] of an SMEM buffer of shape \((?P<shape>[\d,\s]+)\)")


def to_grid_entry_from_table(code: str, rec: Mapping[str, Any], site: Any, reached: Any, text: str,
                             span: Span) -> Moved | None:
    """A scalar table read one past its end (``block_mask_ref[h, i, j]`` with ``i`` at the table's length)
    where exactly one grid axis has one step more than the table has entries there, and its last step is
    that index: the table holds one entry per step, and the grid has a step too many (at that axis's entry)."""
    if code != "PLS302" or site is None or getattr(site, "grid_span", None) is None:
        return None
    m = _TABLE.search(f"{rec.get('message') or ''} {rec.get('sentence') or ''}")
    grid = _grid_ran(site, reached)
    if m is None or grid is None:
        return None
    index, shape = _ints(m.group("index")), _ints(m.group("shape"))
    past = [d for d, (i, n) in enumerate(zip(index, shape)) if i >= n]
    if len(index) != len(shape) or len(past) != 1 or index[past[0]] != shape[past[0]]:
        return None
    extent = shape[past[0]]
    axes = [a for a, g in enumerate(grid) if g == extent + 1]
    if len(axes) != 1:
        return None
    place = grid_entry(text, site.grid_span, axes[0])
    if place is None:
        return None
    return Moved(span=place, related=(Related(span, "the scalar table read one past its end"),),
                 sentence=f"grid axis {axes[0]} has {extent + 1} steps and the table read here has {extent} entries "
                          f"on that dim: its last step reads past the end - the grid has a step too many on axis "
                          f"{axes[0]} (its entry here)")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _grid_ran(site: Any, reached: Any) -> tuple[int, ...] | None:
    from .reach import site_reached

    for call in reached or ():
        grid = call.get("grid") if isinstance(call, Mapping) else getattr(call, "grid", None)
        if grid and site_reached(site, [call]):
            return tuple(int(g) for g in grid)
    return None


def grid_entry(text: str, grid_span: Span, axis: int) -> Span | None:
    """Where entry ``axis`` of the grid written at ``grid_span`` is (analysis/rules/spec_reach.grid_entry, as tier 0's
    PLS020 places it)."""
    from ...analysis.rules.spec_reach import grid_entry as entry_at
    from ...analysis.source import Source

    return entry_at(Source(text), grid_span, axis)

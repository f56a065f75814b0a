"""A block read past the array's end on the last step of a grid axis, by an index map that hands that
axis's index on: the grid has a step too many there, so the finding belongs at that axis's entry of the grid
(client side, never imports jax).

Tier 3 says "the index_map of input rhs returns block (0, 0, 3) at grid step (3, 0, 0): it reads ... past its
end" at the index map (runner/tier3/interpret_records.py). When one block index of that block equals the step
of exactly one grid axis, and that step is the axis's last (the grid the call ran with,
``ReachedCall.grid``), the map is following the grid and the grid runs one step too far (``tiles_n + 1``, a
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
    grid = _grid_ran(site, reached)
    if m is None or grid is None:
        return None
    block, step = _ints(m.group("block")), _ints(m.group("step"))
    if len(step) != len(grid):
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

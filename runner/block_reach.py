"""Blocks an index_map names past the end of their array, found from the recorded call (worker side).

Tier 0 (``analysis/rules/spec_reach.py``, PLS020) reads an index_map against a static grid and an
``out_shape`` written in the source; an input's shape is known only when the code runs. Here the
call the task's entry made is known: its grid (ints), each BlockSpec's block shape and index_map,
and its operands' and outputs' shapes. Each index_map is called with plain ints at the corners of
the grid (every axis at its first and last step: an index_map of sums and products of grid indices
reaches its extremes there), and a block whose first element lies at or past its array's end (or
before its start) is reported: on a TPU the pipeline copies memory the array does not own (a
partial last block, from a ``pl.cdiv`` grid, is allowed). Index maps that read scalar-prefetch
refs, grids with a traced size, and block dims other than ints, ``None`` and ``pl.Squeezed`` are
left to tier 3's interpret run. Nothing runs but the index_maps, on Python ints.
"""

from __future__ import annotations

import inspect
import itertools
from typing import Any

MAX_CORNERS = 64


def blocks_past_end(call: Any) -> list[dict[str, Any]]:
    """``[{"role": "in_specs"|"out_specs", "index", "axis", "block_index", "step", "start", "dim", "block"}]``,
    the first block past the end per BlockSpec of ``call`` (a RecordedCall)."""
    grid_spec = call.kwargs.get("grid_spec")
    if grid_spec is not None and int(getattr(grid_spec, "num_scalar_prefetch", 0) or 0):
        return []  # its index_maps read refs: tier 3 runs them
    grid = getattr(grid_spec, "grid", None) if grid_spec is not None else call.kwargs.get("grid")
    grid = (grid,) if isinstance(grid, int) else tuple(grid or ())
    if not grid or not all(isinstance(g, int) and g > 0 for g in grid) or 2 ** len(grid) > MAX_CORNERS:
        return []
    corners = list(itertools.product(*[sorted({0, g - 1}) for g in grid]))
    operands = [o for o in (call.operands or ()) if hasattr(o, "shape")]
    outputs = _leaves(call.out_shape)
    out: list[dict[str, Any]] = []
    for role, specs, arrays in (("in_specs", _specs(call, "in_specs"), operands),
                                ("out_specs", _specs(call, "out_specs"), outputs)):
        for index, (spec, array) in enumerate(zip(specs, arrays)):
            found = _past_end(spec, tuple(getattr(array, "shape", ()) or ()), corners)
            if found is not None:
                out.append({"role": role, "index": index, **found})
    return out


def _specs(call: Any, name: str) -> list[Any]:
    grid_spec = call.kwargs.get("grid_spec")
    specs = getattr(grid_spec, name, None) if grid_spec is not None else call.kwargs.get(name)
    if specs is None:
        return []
    return list(specs) if isinstance(specs, (list, tuple)) else [specs]


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in _leaves(item)]
    return [tree] if hasattr(tree, "shape") else []


def _past_end(spec: Any, shape: tuple[int, ...], corners: list[tuple[int, ...]]) -> dict[str, Any] | None:
    block, index_map = getattr(spec, "block_shape", None), getattr(spec, "index_map", None)
    if block is None or not callable(index_map) or len(block) != len(shape):
        return None
    sizes = [_block_dim(b) for b in block]
    results: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for step in corners:
        try:
            result = index_map(*step)
            indices = tuple(int(i) for i in (result if isinstance(result, (list, tuple)) else (result,)))
        except Exception:  # noqa: BLE001 - an index_map that needs more than ints: tier 3 runs it
            return None
        if len(indices) != len(shape):
            return None  # the lowering says so (PLS102)
        results.append((step, indices))
    for step, indices in results:
        axis = _outside(indices, sizes, shape)
        if axis is not None:
            found = {"axis": axis, "block_index": indices, "step": step, "start": indices[axis] * sizes[axis],
                     "dim": shape[axis], "block": sizes[axis]}
            reordered = _reordered(results, sizes, shape)
            code = getattr(inspect.unwrap(index_map), "__code__", None)  # (jax wraps the map: ``__wrapped__``)
            where = {"map_at": (code.co_filename, code.co_firstlineno)} if code is not None else {}
            return {**found, "reordered": reordered, **where} if reordered else found
    return None


def _outside(indices: tuple[int, ...], sizes: list[int | None], shape: tuple[int, ...]) -> int | None:
    """The first axis on which the block ``indices`` starts past the array's end (or before its start)."""
    for axis, (i, size, dim) in enumerate(zip(indices, sizes, shape)):
        if size is not None and isinstance(dim, int) and (i * size >= dim or i * size < 0):
            return axis
    return None


def _reordered(results: list[tuple[tuple[int, ...], tuple[int, ...]]], sizes: list[int | None],
               shape: tuple[int, ...]) -> tuple[int, int] | None:
    """Two result positions of the index map whose exchange puts every corner's block inside the array (a map
    whose results are in the wrong order, ``(j, i)`` for ``(i, j)``: the map is the place, not the grid)."""
    for a, b in itertools.combinations(range(len(shape)), 2):
        moved = [tuple(ix[b] if k == a else ix[a] if k == b else v for k, v in enumerate(ix)) for _, ix in results]
        if all(_outside(m, sizes, shape) is None for m in moved):
            return a, b
    return None


def _block_dim(dim: Any) -> int | None:
    """Elements per block index along a dim: an int, 1 for a squeezed dim, None for anything else."""
    if isinstance(dim, int):
        return dim
    if dim is None or type(dim).__name__ == "Squeezed":
        return 1
    return None


def grid_axis_past(found: dict[str, Any], grid: Any) -> int | None:
    """The grid axis whose last step the index map hands on as the block index that lies past the end (the
    grid, not the map, has a step too many: ``(n // b) + 1``), else None."""
    if not grid or found.get("start", -1) < 0 or found.get("reordered"):
        return None
    index = found["block_index"][found["axis"]]
    steps = [j for j, (s, g) in enumerate(zip(found["step"], grid)) if s == g - 1 and s == index and s > 0]
    return steps[0] if len(steps) == 1 else None


def past_end_record(found: dict[str, Any], place: tuple[int, int] | None, call_line: int | None,
                    grid_axis: int | None = None) -> dict[str, Any]:
    """The tier-1 error record (PLS020) for one block past the end, at the BlockSpec (``place``), or at the grid
    entry (``grid_axis``) that has more steps than the array has blocks."""
    what = "input" if found["role"] == "in_specs" else "output"
    sentence = (f"the index_map of {what} {found['index']} ({found['role']}[{found['index']}]) returns block "
                f"{found['block_index']} at grid step {found['step']}: on axis {found['axis']} that block starts at "
                f"element {found['start']}, {'past the end of' if found['start'] >= 0 else 'before'} the array's "
                f"{found['dim']} there (block {found['block']}); the TPU pipeline would copy memory the array does "
                "not own")
    if grid_axis is not None:
        sentence = (f"grid axis {grid_axis} has more steps than the array has blocks: {sentence} (the index map "
                    f"hands on the grid index as it is, so the grid's entry is the one to fix)")
    elif found.get("reordered"):
        a, b = found["reordered"]
        sentence += (f"; with the index map's results {a} and {b} exchanged every block lies inside the array: "
                     "check the order of its results (or of its parameters)")
    where = place or ((call_line, None) if call_line else None)
    return {"stage": "tier 1", "tier": 1, "code": "PLS020", "origin": "pallasite runner", "severity": "error",
            "type": "BlockPastEnd", "sentence": sentence, "message": sentence, "detail": None, "frames": [],
            "mentions": [{"line": where[0], "column": where[1]}] if where else [], "refs": [], "vmem": None,
            "mosaic_codes": [], "syntax": None}

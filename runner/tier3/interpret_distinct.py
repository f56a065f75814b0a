"""Tier 3's reduced inputs made so a bug can show: distinct extents per axis, a partial last block kept
(worker side: imports jax).

A kernel that swaps two grid axes in an index map, reads a block with the wrong program id, or builds
its grid from the wrong dim gives the right answer on square inputs: both axes have the same number
of steps, so the swapped block is a block that exists and holds what the reference expects. And a grid
written ``n // block`` where ``pl.cdiv`` was meant is right whenever ``n`` is a multiple of the block.
Tier 3 shrinks large inputs (``interpret.shrink_shapes``); this module says how, so such bugs stay
visible in the smaller run (a published study of test inputs for tensor kernels found boundary shapes
catch tail-mask bugs that representative shapes miss):

- ``shrink_plan``: each size value that blocks cut gets its own block count (2, 4, 8, ... blocks: counts
  that divide the original's, so a kernel that splits its grid evenly still can), so two different
  sizes never shrink to one extent; a size that is not a multiple of its block keeps its remainder
  (``2 * block + size % block``), so the last, partial block is still there to mask.
- ``add_tails``: an extent that is a whole number of blocks gets half a block more where the kernel's own
  grid says it takes a partial last block (it grows by a step: ``pl.cdiv``), so its tail masks run.
- ``split_square``: dims that share one extent on different axes (a square matrix; q, k and v of one
  length) get different extents where the task allows it: a group of them (all those on one axis, then
  one at a time) gets another block count when the entry still traces with every call's blocks kept,
  no index_map names a block past its array's end, and the reference traces and returns the entry's
  output shapes. Only ``jax.eval_shape`` runs; a task without a reference keeps its square shapes.

Random inputs are standard normal draws (``interpret.random_inputs``): not symmetric.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import jax

from ..block_reach import blocks_past_end
from .interpret_shrink import blocks_of

MAX_SPLIT_TRIES = 8  # traces spent splitting equal extents


def shrink_plan(tiled: dict[int, set[int]], uneven: dict[int, set[int]], whole: set[int], blocks_per_dim: int = 2,
                distinct: bool = False) -> dict[int, tuple[int, int]]:
    """{original size: (new size, its unit)} for the sizes blocks cut: ``tiled`` (every block divides it),
    ``uneven`` (some block leaves a remainder: kept), ``whole`` (some operand takes it whole: unchanged).
    ``distinct``: each size value its own block count, largest sizes first."""
    plan: dict[int, tuple[int, int]] = {}
    used: set[int] = set()
    for size in sorted(set(tiled) | set(uneven), reverse=True):
        if size in whole:
            continue
        bs = tiled.get(size, set()) | uneven.get(size, set())
        unit = math.lcm(*bs)
        tail = size % unit
        count = (size - tail) // unit
        if not distinct:
            k = blocks_per_dim if count % blocks_per_dim == 0 else 1
        else:
            k = next((c for c in _counts(count, blocks_per_dim) if unit * c + tail not in used), None)
            if k is None:
                continue
        target = unit * k + tail
        if target < size:
            plan[size] = (target, unit)
            used.add(target)
    return plan


def _counts(count: int, first: int) -> list[int]:
    """Block counts to try for a size of ``count`` blocks: ``first``, then doublings, each dividing ``count``
    (one block when it divides nothing else)."""
    out = [c for c in (first, first * 2, first * 4, first * 8, first * 16) if c < count and count % c == 0]
    return out or [1]


def split_square(shapes: tuple[Any, ...], units: dict[int, int], probe: Callable[[tuple[Any, ...]], list[Any]],
                 entry: Callable[..., Any], reference: Callable[..., Any] | None,
                 originals: dict[int, int]) -> tuple[tuple[Any, ...], bool]:
    """``shapes`` with dims sharing an extent on different axes given different extents where the task
    allows it (module doc). ``units``: block unit per shrunk extent (the new extents are added to it); ``originals``: the extent's size before
    the shrink (its block count bounds the new one). Returns (shapes, whether anything changed)."""
    if reference is None:
        return shapes, False
    try:
        want = blocks_of(probe(shapes))
    except Exception:  # noqa: BLE001 - the shrunk shapes do not trace: nothing to split
        return shapes, False
    current, tries = shapes, 0
    for extent, unit in sorted(units.items(), reverse=True):
        positions = _positions(current, extent)
        if len({axis for _, axis in positions}) < 2:
            continue  # one extent on one axis only: no square to hide a swap
        for group in _groups(positions):
            if tries >= MAX_SPLIT_TRIES or len(group) == len(positions):
                continue
            new = _free_extent(current, extent, unit, originals.get(extent, extent))
            if new is None:
                break
            tries += 1
            trial = _replace(current, group, new)
            if _allowed(trial, probe, want, entry, reference):
                current = trial
                units.setdefault(new, unit)  # (the caller's map: the new extent's tail can be tried too)
                positions = [p for p in positions if p not in group]
                if len({axis for _, axis in positions}) < 2:
                    break
    return current, current is not shapes


def add_tails(shapes: tuple[Any, ...], units: dict[int, int], probe: Callable[[tuple[Any, ...]], list[Any]],
              entry: Callable[..., Any], reference: Callable[..., Any] | None) -> tuple[tuple[Any, ...], bool]:
    """``shapes`` with each shrunk extent that is a whole number of blocks given a partial last block (half a
    block more) where the kernel says it takes one: its grid grows by a step for it (a ``pl.cdiv`` grid; a
    grid written ``n // block`` says the kernel means multiples, and is left as it is), its blocks stay,
    no block starts past its array, and the reference traces with the entry's output shapes."""
    if reference is None:
        return shapes, False
    try:
        before = probe(shapes)
        want = blocks_of(before)
    except Exception:  # noqa: BLE001 - nothing traced: nothing to add
        return shapes, False
    current, tries = shapes, 0
    for extent, unit in sorted(units.items(), reverse=True):
        positions = _positions(current, extent)
        if not positions or extent % unit or unit < 8 or tries >= MAX_SPLIT_TRIES:
            continue
        tries += 1
        trial = _replace(current, positions, extent + unit // 2)
        if _allowed(trial, probe, want, entry, reference, partial=True) and _grid_grew(before, probe(trial)):
            current, before = trial, probe(trial)
    return current, current is not shapes


def _grid_grew(before: list[Any], after: list[Any]) -> bool:
    """Some call's grid has a step more at the larger shapes (a ceil-divided grid) and none has fewer."""
    from ..grid_order import call_grid

    grew = False
    for a, b in zip(before, after):
        ga, gb = call_grid(a.kwargs) or (), call_grid(b.kwargs) or ()
        if len(ga) != len(gb) or any(y < x for x, y in zip(ga, gb)):
            return False
        grew = grew or any(y > x for x, y in zip(ga, gb))
    return grew and len(before) == len(after)


def _positions(shapes: tuple[Any, ...], extent: int) -> list[tuple[int, int]]:
    leaves = _arrays(shapes)
    return [(i, axis) for i, a in enumerate(leaves) for axis, d in enumerate(a.shape) if d == extent]


def _groups(positions: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Every position on one axis together (an elementwise op's rows), then each position alone (a matmul's M)."""
    axes = sorted({axis for _, axis in positions})
    return [[p for p in positions if p[1] == axis] for axis in axes] + [[p] for p in positions]


def _free_extent(shapes: tuple[Any, ...], extent: int, unit: int, original: int) -> int | None:
    """Another extent for dims now of ``extent``: a block count dividing the original's, not used by any dim."""
    used = {d for a in _arrays(shapes) for d in a.shape}
    tail = original % unit
    count = (original - tail) // unit
    for c in sorted(range(1, count), key=lambda c: (c < 2, c)):  # two blocks or more first: a swap needs two
        new = unit * c + tail
        if count % c == 0 and new != extent and new not in used and new < original:
            return new
    return None


def _replace(shapes: tuple[Any, ...], group: list[tuple[int, int]], new: int) -> tuple[Any, ...]:
    leaves, treedef = jax.tree.flatten(shapes, is_leaf=_is_array)
    arrays = [i for i, a in enumerate(leaves) if _is_array(a)]
    for leaf, axis in group:
        a = leaves[arrays[leaf]]
        leaves[arrays[leaf]] = jax.ShapeDtypeStruct(tuple(new if k == axis else d for k, d in enumerate(a.shape)),
                                                    a.dtype)
    return jax.tree.unflatten(treedef, leaves)


def _allowed(trial: tuple[Any, ...], probe: Callable[[tuple[Any, ...]], list[Any]], want: list[Any],
             entry: Callable[..., Any], reference: Callable[..., Any], partial: bool = False) -> bool:
    """The entry traces at ``trial`` keeping every call's blocks, no block lies past its array, and the
    reference traces there with the entry's output shapes. ``partial``: a block may now overhang its dim
    (a partial last block), so only the block and scratch shapes must stay."""
    keep = (lambda got: [g[:3] for g in got]) if partial else (lambda got: got)  # noqa: E731
    try:
        calls = probe(trial)
        if not calls or keep(blocks_of(calls)) != keep(want) or any(blocks_past_end(c) for c in calls):
            return False
        got = jax.eval_shape(entry, *trial)
        expected = jax.eval_shape(reference, *trial)
    except Exception:  # noqa: BLE001 - the task does not take these shapes
        return False
    shape = lambda t: [tuple(a.shape) for a in jax.tree.leaves(t) if hasattr(a, "shape")]  # noqa: E731
    return shape(got) == shape(expected)


def _arrays(shapes: Any) -> list[Any]:
    return [a for a in jax.tree.leaves(shapes, is_leaf=_is_array) if _is_array(a)]


def _is_array(a: Any) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype")

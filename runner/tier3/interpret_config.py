"""Tier 3's inputs drawn the way the task draws them, at a reduced size (worker side: imports jax).

A JAXBench task makes its inputs with ``create_inputs()`` from its ``CONFIG`` (sizes) and its
tables from the same values: a paged attention's page table is ``arange(batch * pages_per_seq)``,
its lengths ``pages_per_seq * page_size``. Shrinking the arrays one by one (``interpret.shrink_shapes``,
``interpret_shrink.shrink_further``) keeps the block shapes but cannot keep such tables: the pages
shrink, the table would name pages that are gone, so tier 3 used to fill integer inputs with zeros,
and every DMA of a paged kernel copied page 0 (a copy past the last page, or an accumulator
never zeroed, was found at no tier).

``reduce_config`` shrinks the task's ``CONFIG`` instead: per int value that is a size of the inputs
(the largest byte share first) it tries smaller values (2, 1/8, 1/4, 1/2), and keeps one when the
task's own inputs function still traces at that CONFIG, every pallas_call the entry makes keeps
the block and scratch shapes it had (``interpret_shrink.blocks_of``) and the integer inputs all
change with the value or none does (a table the task spells out apart from CONFIG would name pages
that are gone). A value that only divides a dimension (heads in ``heads * head_dim``) is tried after those
that are one (``size_keys``). Every size goes as small as the
blocks allow (the grid, and so the interpret time, shrinks with it), and the result is used only
when the inputs then fit the budget. ``config_set`` then holds that CONFIG while the inputs are made and the entry and the
reference run, so the tables are the task's own at the reduced size. Only ``eval_shape`` tracing
while searching; nothing runs.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from .interpret_shrink import BUDGET_BYTES, _smaller, blocks_of, input_bytes

MAX_TRIES = 24  # traces spent at most


@dataclass(frozen=True)
class Reduced:
    """The CONFIG values tier 3 runs the task at, and the input shapes they make."""

    values: tuple[tuple[str, int], ...]
    shapes: tuple[Any, ...]

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.values)


def config_dicts(task: Any) -> list[dict[str, Any]]:
    """The ``CONFIG`` dicts the task's functions read: the entry's and the reference's module
    globals, and a dict the inputs function closes over (``tasks_runtime`` binds the module's)."""
    out: list[dict[str, Any]] = []

    def add(d: Any) -> None:
        if isinstance(d, dict) and not any(d is seen for seen in out):
            out.append(d)

    for fn in (getattr(task, "entry", None), getattr(task, "reference", None), getattr(task, "inputs", None)):
        while isinstance(fn, functools.partial):
            fn = fn.func
        if fn is None:
            continue
        fn = inspect.unwrap(fn)
        space = getattr(fn, "__globals__", None)
        if isinstance(space, dict):
            add(space.get("CONFIG"))
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:
                continue
            if isinstance(value, dict) and _same_keys(value, task):
                add(value)
    return out


def _same_keys(d: dict[str, Any], task: Any) -> bool:
    config = getattr(task, "config", None) or {}
    return bool(config) and set(config) <= set(d)


@contextlib.contextmanager
def config_set(dicts: list[dict[str, Any]], values: dict[str, int] | None) -> Iterator[None]:
    """Each dict holds ``values`` for the duration (changed in place: a closure's reference to the
    dict sees them too), then its own values again."""
    saved = [(d, {k: d[k] for k in values if k in d}) for d in dicts] if values else []
    for d, _old in saved:
        d.update({k: v for k, v in values.items() if k in d})
    try:
        yield
    finally:
        for d, old in saved:
            d.update(old)


def reduce_config(task: Any, abstract: tuple[Any, ...], calls: list[Any],
                  probe: Callable[[tuple[Any, ...]], list[Any]], budget: int = BUDGET_BYTES) -> Reduced | None:
    """Smaller CONFIG values under which the task's inputs fit ``budget`` bytes and every call
    keeps its blocks (see the module doc); None when the task has no CONFIG or none fits."""
    config = getattr(task, "config", None) or {}
    inputs = getattr(task, "inputs", None)
    dicts = config_dicts(task)
    if not config or inputs is None or not dicts or not calls or input_bytes(abstract) <= budget:
        return None
    keys = size_keys(config, abstract)
    want = blocks_of(calls)
    chosen: dict[str, int] = {}
    shapes = abstract
    tables = Tables(dicts, inputs)
    tries = 0
    for key in keys:  # every size as small as the blocks allow, not only to the budget: the grid
        for new in _smaller(config[key]):
            if tries >= MAX_TRIES:
                break
            tries += 1
            trial = {**chosen, key: new}
            try:
                with config_set(dicts, trial):
                    made = _shapes(inputs)
                    traced = probe(made)
                fits = bool(traced) and blocks_of(traced) == want and (
                    not any(_is_int(a) for a in jax.tree.leaves(made))
                    or tables_follow(tables.at(trial), tables.at({**chosen, key: config[key]})))
            except Exception:  # noqa: BLE001 - the task does not take this size: try the next
                continue
            if fits:
                chosen, shapes = trial, made
                break
    if not chosen or input_bytes(shapes) > budget:
        return None
    return Reduced(tuple(sorted(chosen.items())), shapes)


def size_keys(config: dict[str, Any], abstract: tuple[Any, ...]) -> list[str]:
    """The CONFIG keys worth shrinking, largest byte share first: a value that is a dimension of the
    inputs, then one that only divides a dimension (a head count inside ``heads * head_dim``)."""
    sizes = _byte_share(abstract)
    ranked = []
    for key, value in config.items():
        if not _is_size(value):
            continue
        if value in sizes:
            ranked.append(((0, -sizes[value]), key))
            continue
        shares = [share for dim, share in sizes.items() if dim > value and dim % value == 0]
        if shares:
            ranked.append(((1, -max(shares)), key))
    return [key for _rank, key in sorted(ranked)]


def tables_follow(trial: list[np.ndarray], earlier: list[np.ndarray]) -> bool:
    """True when the integer inputs (a page table, lengths) all changed with the size just tried
    (``trial``: their values at it, ``earlier``: at the value it replaces), or none did. A table that
    changes beside one that does not was spelled out apart from the CONFIG (JAXBench 7p's
    per-sequence lengths are a module constant, its page table follows ``pages_per_seq``): the
    lengths would name pages the smaller table no longer has, and a correct kernel would be blamed
    for reading past them. A size no table depends on (a GMM's output width beside its group sizes)
    changes none of them."""
    if len(trial) != len(earlier):
        return False
    changed = {a.shape != b.shape or not np.array_equal(a, b) for a, b in zip(trial, earlier)}
    return len(changed) <= 1


class Tables:
    """The task's integer inputs at given CONFIG values, from a compiled run that returns only them
    (XLA drops the making of the float arrays, so even the full CONFIG costs no memory); each set
    of values is run once."""

    def __init__(self, dicts: list[dict[str, Any]], inputs: Callable[[], Any]) -> None:
        self._dicts, self._inputs = dicts, inputs
        self._made: dict[tuple[tuple[str, int], ...], list[np.ndarray]] = {}

    def at(self, values: dict[str, int]) -> list[np.ndarray]:
        key = tuple(sorted(values.items()))
        if key not in self._made:
            with config_set(self._dicts, values):
                leaves = jax.jit(lambda: [a for a in jax.tree.leaves(self._inputs()) if _is_int(a)])()
            self._made[key] = [np.asarray(a) for a in leaves]
        return self._made[key]


def _is_int(a: Any) -> bool:
    return hasattr(a, "dtype") and jnp.issubdtype(a.dtype, jnp.integer)


def _shapes(fn: Callable[[], Any]) -> tuple[Any, ...]:
    """The shapes ``fn()`` makes now (a fresh function each time: ``eval_shape`` caches by function,
    and the inputs function reads the CONFIG as it is when called)."""
    shapes = jax.eval_shape(lambda: fn())
    if isinstance(shapes, list):
        shapes = tuple(shapes)
    return shapes if isinstance(shapes, tuple) else (shapes,)


def _byte_share(args: Any) -> dict[int, int]:
    share: dict[int, int] = {}
    for a in jax.tree.leaves(args):
        if hasattr(a, "shape") and hasattr(a, "dtype"):
            nbytes = input_bytes([a])
            for d in set(a.shape):
                share[d] = share.get(d, 0) + nbytes
    return share


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 2

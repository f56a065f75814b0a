"""Without a reference, tier 3 compares the kernel with itself at another tiling (worker side: imports jax).

A task with no reference can only be caught by what needs none: NaN, unwritten blocks, failures, races, an order
dependence. But its block sizes say more: a keyword-only int parameter of the entry (``def matmul(x, y, *, bk:
int = 256)``) or an int entry of the module's ``TUNED_PARAMS`` is, by the task convention
(docs/task-convention.md), a choice autotuning may change, and no choice may change the answer. So the entry runs
again on the same inputs with those values moved (a declared candidate of ``TUNABLES``, else half the default):
outputs that differ from the first run's, beyond a tolerance that admits a reordered float sum, mean one of the two
tilings gives a wrong result (a grid divided by a literal where the block size was meant, an offset or mask built
from a constant, an init or a flush on a step that exists only at one tiling).

``moved_runs`` makes at most ``MAX_RUNS`` runs: every value moved at once, then (when that run fails, or to name
the one responsible) one value at a time. A moved value the entry rejects (an assert, a shape that no longer
divides) is a tiling it does not take: no finding. An entry whose own run took over ``TILING_SKIP_AFTER_S`` is not
run again, and each moved run has a time limit, so the comparison never takes a worker's time from the rest.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np

from ...analysis.types import BLOCK_SIZE_NAME
from .interpret_compare import Tolerance, compare

MAX_RUNS = 3  # interpret runs spent on other tilings at most
TILING_SKIP_AFTER_S = 30.0  # an entry whose own run took longer is not run at other tilings (each moved run: at
#   most four times the own run's time, 15 s at least; one past it is a tiling that did not run)
# a reordered float sum stays within these (relative; atol is taken relative to the largest output)
TILING_TOLERANCES = {"float64": 1e-6, "float32": 1e-3, "float16": 5e-3, "bfloat16": 5e-2}


def tunable_moves(task: Any) -> dict[str, tuple[str, int, int]]:
    """{name: (kind, default, moved)} for the entry's keyword-only int parameters ("keyword") and its module's
    ``TUNED_PARAMS`` int entries ("tuned_params") that are block sizes (named like one, or given candidates in
    ``TUNABLES``: a ``top_k: int = 2`` changes the answer by design) and have another value to move to."""
    declared = dict(getattr(task, "tunables", None) or {})
    out: dict[str, tuple[str, int, int]] = {}
    try:
        params = inspect.signature(task.entry).parameters.values()
    except (TypeError, ValueError):
        params = []
    for p in params:
        if p.kind == p.KEYWORD_ONLY and _block_size(p.name, p.default, declared):
            moved = _moved(p.default, declared.get(p.name))
            if moved is not None:
                out[p.name] = ("keyword", p.default, moved)
    tuned = getattr(_module_of(task), "TUNED_PARAMS", None)
    for name, value in (tuned.items() if isinstance(tuned, dict) else ()):
        if _block_size(name, value, declared) and name not in out:
            moved = _moved(value, declared.get(name))
            if moved is not None:
                out[name] = ("tuned_params", value, moved)
    return out


def _block_size(name: str, value: Any, declared: dict[str, list[int]]) -> bool:
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return BLOCK_SIZE_NAME.search(name) is not None or list(declared.get(name) or [value]) != [value]


def _moved(default: int, candidates: list[int] | None) -> int | None:
    """The value a tunable moves to: the declared candidate nearest below its default (else above), or half the
    default when none is declared; None when there is nothing to move to."""
    others = sorted({int(c) for c in candidates or () if int(c) != default and int(c) > 0})
    if others:
        below = [c for c in others if c < default]
        return below[-1] if below else others[0]
    return default // 2 if default >= 2 and default % 2 == 0 else None


def _module_of(task: Any) -> Any:
    return sys.modules.get(getattr(task.entry, "__module__", "") or "")


@contextlib.contextmanager
def applied(task: Any, values: dict[str, tuple[str, int, int]]) -> Iterator[Callable[..., Any]]:
    """The entry with ``values`` moved: keywords passed, ``TUNED_PARAMS`` entries set on the module meanwhile."""
    module = _module_of(task)
    keywords = {name: moved for name, (kind, _d, moved) in values.items() if kind == "keyword"}
    tuned = {name: moved for name, (kind, _d, moved) in values.items() if kind == "tuned_params"}
    saved = getattr(module, "TUNED_PARAMS", None)
    if tuned and module is not None:
        module.TUNED_PARAMS = {**saved, **tuned}
    try:
        yield functools.partial(task.entry, **keywords) if keywords else task.entry
    finally:
        if tuned and module is not None:
            module.TUNED_PARAMS = saved


def tiling_tolerance(outputs: Any) -> Tolerance | None:
    leaves = [np.asarray(a) for a in jax.tree.leaves(outputs)]
    floats = [a for a in leaves if a.dtype.kind == "f" or a.dtype.name == "bfloat16"]
    if not floats:
        return Tolerance(0.0, 0.0, "exact (integer outputs)") if leaves else None
    tol = max(TILING_TOLERANCES.get(a.dtype.name, 1e-3) for a in floats)
    top = max((float(np.nanmax(np.abs(a.astype(np.float64)))) for a in floats if a.size), default=0.0)
    top = top if np.isfinite(top) and top > 0 else 1.0
    return Tolerance(tol * top, tol, f"{tol:g} relative, atol relative to the largest output ({top:.3g}): "
                                     "room for a float sum in another order")


def moved_runs(run_with: Callable[[Callable[..., Any]], Any], outputs: Any,
               moves: dict[str, tuple[str, int, int]], task: Any) -> tuple[dict[str, Any], dict] | None:
    """(the first problem, the moved values) when the outputs at another tiling differ from ``outputs``; None
    when every tiling tried agrees or none ran. ``run_with(entry)`` runs an entry on the same inputs and gives
    a Run (interpret_run.Run)."""
    tolerance = tiling_tolerance(outputs)
    runs = 0

    def differs(values: dict[str, tuple[str, int, int]]) -> tuple[bool, dict[str, Any] | None]:
        nonlocal runs
        runs += 1
        with applied(task, values) as entry:
            rerun = run_with(entry)
        if rerun.error is not None or rerun.races or rerun.outputs is None:
            return False, None  # a tiling the entry does not take (or one that fails on its own: said elsewhere)
        if [a.shape for a in jax.tree.leaves(rerun.outputs)] != [a.shape for a in jax.tree.leaves(outputs)]:
            return False, None
        problems = [p for p in compare(rerun.outputs, outputs, tolerance) if p["kind"] in ("mismatch", "nan")]
        return True, problems[0] if problems else None

    ran, problem = differs(moves)
    singles = list(moves.items()) if len(moves) > 1 and (not ran or problem is not None) else []
    for name, move in singles:
        if runs >= MAX_RUNS:
            break
        _ran, alone = differs({name: move})
        if alone is not None:
            return alone, {name: move}
    return (problem, moves) if problem is not None else None


def tunable_line(source: str, name: str) -> int | None:
    """The line of a tunable's default: a keyword-only parameter's default in a ``def``, else a dict entry
    ``"name": N`` (``TUNED_PARAMS``); None when the source does not parse or holds neither."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    entries = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg, default in zip(node.args.kwonlyargs, node.args.kw_defaults):
                if arg.arg == name and default is not None:
                    return default.lineno
        elif isinstance(node, ast.Dict):
            entries += [key.lineno for key in node.keys if isinstance(key, ast.Constant) and key.value == name]
    return min(entries) if entries else None


def written_out(source: str, call_line: int | None, moved: dict[str, tuple[str, int, int]]) -> tuple[int, int, str] | None:
    """(line, column, name) of the one number in the function holding the call (``call_line``) that equals a moved
    block size's default while that name is in scope there: a size written out where the block size was meant
    (``grid=(m // bm, k // 256)`` with ``bk = 256``). None when there is none, or more than one to choose from."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    holder = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and call_line is not None \
                and node.lineno <= call_line <= (node.end_lineno or node.lineno):
            holder = node if holder is None or node.lineno > holder.lineno else holder
    if holder is None:
        return None
    names = {arg.arg for arg in holder.args.args + holder.args.kwonlyargs}
    defaults = {id(d) for d in holder.args.defaults + holder.args.kw_defaults if d is not None}
    found = []
    for name, (_kind, default, _new) in moved.items():
        if name not in names:
            continue
        for node in ast.walk(holder):
            if isinstance(node, ast.Constant) and type(node.value) is int and node.value == default \
                    and id(node) not in defaults:
                found.append((node.lineno, node.col_offset, name))
    return found[0] if len(found) == 1 else None

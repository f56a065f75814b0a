"""Tier-0 rule PLS016: a grid axis that carries state from step to step, marked "parallel" (wrong
on chips whose device has two TensorCores: v4's and v5p's megacore).

A kernel that initialises a ref under ``pl.when(pl.program_id(a) == 0)`` and reads it on other
steps (an accumulator, a running max) relies on axis ``a``'s steps running in order from 0 on one
core. "parallel" lets the compiler split that axis between the device's TensorCores: the core that
starts in the middle of the axis never runs step 0 (its accumulator starts from whatever the
buffer held), and both cores write the output blocks the axis shares. On a chip with one
TensorCore per device (v5e, v6e) "parallel" changes nothing of that: the warning says the kernel is
right there but wrong on the two-core chips, as tier 3 does.

Said only when certain from the source (Python's ``ast``): the axis is an int literal, the
condition is ``program_id(a) == 0`` (or ``k == 0`` with ``k`` bound once in the kernel to
``pl.program_id(a)``), the ``pl.when`` body (a decorated nested function, or ``pl.when(c)(f)``)
stores into a kernel parameter, the kernel stores into it outside the body a value computed
from what it held (``acc[...] += x``, or through locals: ``m_prev = m[...]`` ... ``m[...] =
max(m_prev, x)``), and the
pallas_call's ``dimension_semantics`` entry for ``a`` is "parallel". The finding is at that entry
(with a fix to "arbitrary" when it is a string), the ``pl.when`` and the read related.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Iterator

from ..call_values import pallas_call_at
from ..ast_units import index_of, walk
from ..origins import callee_name
from ..types import Finding, KernelSite, Related, Span
from .context import RuleContext, finding, python_tree, replace, tpu_sites

# Chips whose device shares a kernel's "parallel" axes between two TensorCores (megacore): jax's
# ChipVersion.supports_megacore, which the tier-3 interpreter reads (runner/tier3/interpret.py's
# target_cores; tests/test_megacore_rule.py pins the two together).
MEGACORE = ("v4", "v5p")


def parallel_carried_axis(ctx: RuleContext) -> Iterator[Finding]:
    tree = python_tree(ctx.source)
    if tree is None:
        return
    for site in tpu_sites(ctx):
        semantics = site.dimension_semantics
        if not semantics or "parallel" not in semantics:
            continue
        kernel = _kernel_def(tree, site)
        if kernel is None:
            continue
        said: set[int] = set()
        for axis, ref, when in carried_refs(kernel):
            if axis in said or not (0 <= axis < len(semantics)) or semantics[axis] != "parallel":
                continue
            said.add(axis)
            entry = _entry(tree, site, axis, len(semantics))
            read = _first_read(kernel, ref, when)
            related = [Related(span=_span(when), message=f"{ref} is initialised here, on step 0 of axis {axis} only")]
            if read is not None:
                related.append(Related(span=_span(read), message=f"{ref} is read here, on every step"))
            fix = None
            if isinstance(entry, ast.Constant) and isinstance(entry.value, str):
                quote = ctx.source.text.splitlines()[entry.lineno - 1][entry.col_offset]
                fix = replace(f'Mark axis {axis} "arbitrary"', _span(entry), f"{quote}arbitrary{quote}")
            where = (f"On {ctx.target} the device's two TensorCores split" if ctx.target in MEGACORE else
                     f"Harmless on {ctx.target} (one TensorCore per device), but on two-core chips such as "
                     f"{'/'.join(MEGACORE)} the two TensorCores split")
            found = finding(
                "PLS016",
                f'grid axis {axis} is marked "parallel", but the kernel carries {ref} across its steps: it '
                f"initialises {ref} when program_id({axis}) == 0 and reads it on the other steps. {where} a "
                f'"parallel" axis: the core that starts mid-axis never runs step 0, and both write the '
                f'blocks the axis shares. Mark axis {axis} "arbitrary".',
                _span(entry) if entry is not None else site.dimension_semantics_span or site.span,
                fix=fix, kernel=site.kernel_name, related=tuple(related))
            # on a two-core target the kernel is wrong there: an error (a warning where it is harmless)
            yield dataclasses.replace(found, severity="error") if ctx.target in MEGACORE else found


def _kernel_def(tree: ast.Module, site: KernelSite) -> ast.AST | None:
    """The kernel's ``def``: tier 0's, else the one function of the file the pallas_call's first
    argument names, directly or through ``functools.partial(kernel, ...)``."""
    defs = index_of(tree).defs
    if site.kernel_def_span is not None:
        return next((n for n in defs if n.lineno - 1 == site.kernel_def_span.line), None)
    call = pallas_call_at(tree, site.span)
    first = call.args[0] if call is not None and call.args else None
    if isinstance(first, ast.Call) and callee_name(first) == "partial" and first.args:
        first = first.args[0]
    if not isinstance(first, ast.Name):
        return None
    named = [n for n in defs if n.name == first.id]
    return named[0] if len(named) == 1 else None


_CARRIED = "_pallasite_carried_refs"


def carried_refs(kernel: ast.AST) -> Iterator[tuple[int, str, ast.AST]]:
    """(axis, ref, the pl.when node) for every kernel parameter stored under a
    ``pl.when(program_id(axis) == 0)`` body and read outside it. Kept on the kernel's node: a
    function whose text did not change keeps its nodes from one analysis to the next (ast_units)."""
    found = getattr(kernel, _CARRIED, None)
    if found is None:
        found = tuple(_carried_refs(kernel))
        setattr(kernel, _CARRIED, found)
    return iter(found)


def _carried_refs(kernel: ast.AST) -> Iterator[tuple[int, str, ast.AST]]:
    params = {a.arg for a in kernel.args.posonlyargs + kernel.args.args + kernel.args.kwonlyargs}
    nodes = walk(kernel)  # once, for the four readings below (each walked the whole kernel)
    pids = _program_id_names(kernel, nodes)
    nested = {n.name: n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not kernel}
    facts = None
    for when, body in _when_bodies(kernel, nested, nodes):
        axis = _first_step_axis(when.args[0] if when.args else None, pids)
        if axis is None:
            continue
        stored = sorted({name for node in body for name in _stored_refs(node)} & params)
        inside = {id(n) for node in body for n in walk(node)}
        facts = facts or _StoreFacts(kernel, nodes)
        for ref in stored:
            if _accumulates(facts, ref, inside):
                yield axis, ref, when


def _program_id_names(kernel: ast.AST, nodes: list[ast.AST] | None = None) -> dict[str, int]:
    """Names bound once in the kernel to ``pl.program_id(axis)`` (``k = ...``, or unpacked:
    ``h, i, j = pl.program_id(0), pl.program_id(1), pl.program_id(2)``)."""
    bound: dict[str, list[ast.expr | None]] = {}
    for node in walk(kernel) if nodes is None else nodes:
        if isinstance(node, (ast.For, ast.comprehension, ast.With, ast.NamedExpr)):
            for name in (n.id for n in walk(node.target if not isinstance(node, ast.With) else node)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)):
                bound.setdefault(name, []).append(None)
        if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            plain = isinstance(node, ast.Assign)
            if plain and isinstance(t, ast.Name):
                bound.setdefault(t.id, []).append(node.value)
            elif plain and isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    and len(t.elts) == len(node.value.elts):
                for target, value in zip(t.elts, node.value.elts):
                    for name in (n.id for n in walk(target) if isinstance(n, ast.Name)):
                        bound.setdefault(name, []).append(value if isinstance(target, ast.Name) else None)
            else:
                for name in (n.id for n in walk(t) if isinstance(n, ast.Name)):
                    bound.setdefault(name, []).append(None)
    out = {}
    for name, values in bound.items():
        if len(values) == 1 and values[0] is not None:
            axis = _program_id_axis(values[0])
            if axis is not None:
                out[name] = axis
    return out


def _program_id_axis(node: ast.AST | None) -> int | None:
    if not isinstance(node, ast.Call) or callee_name(node) != "program_id":
        return None
    arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "axis"), None)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and not isinstance(arg.value, bool):
        return arg.value
    return None


def _first_step_axis(cond: ast.AST | None, pids: dict[str, int]) -> int | None:
    if not (isinstance(cond, ast.Compare) and len(cond.ops) == 1 and isinstance(cond.ops[0], ast.Eq)):
        return None
    left, right = cond.left, cond.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    if not (isinstance(right, ast.Constant) and right.value == 0 and not isinstance(right.value, bool)):
        return None
    if isinstance(left, ast.Name):
        return pids.get(left.id)
    return _program_id_axis(left)


def _when_bodies(kernel: ast.AST, nested: dict[str, ast.AST],
                 nodes: list[ast.AST] | None = None) -> Iterator[tuple[ast.Call, list[ast.stmt]]]:
    for node in walk(kernel) if nodes is None else nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node is not kernel:
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and callee_name(deco) == "when":
                    yield deco, node.body
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Call) and callee_name(node.func) == "when" \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id in nested:
            yield node.func, nested[node.args[0].id].body


def _stored_refs(node: ast.AST) -> Iterator[str]:
    for n in walk(node):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                yield t.value.id


def _reads(node: ast.AST, ref: str) -> bool:
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == ref:
        return isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.AugAssign):
        t = node.target
        return isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == ref
    return False


class _StoreFacts:
    """What ``_accumulates`` asks of a kernel, read in one walk: each plain assignment's target
    names, the names it loads and the refs it reads (``r[...]``), and the augmented assignments."""

    def __init__(self, kernel: ast.AST, nodes: list[ast.AST] | None = None) -> None:
        self.assigns: list[tuple[ast.Assign, list[str], set[str], set[str]]] = []
        self.augmented: list[ast.AugAssign] = []
        for node in walk(kernel) if nodes is None else nodes:
            if isinstance(node, ast.AugAssign):
                self.augmented.append(node)
            elif isinstance(node, ast.Assign):
                loads, reads = set(), set()
                for n in walk(node.value):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                        loads.add(n.id)
                    elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and isinstance(n.ctx, ast.Load):
                        reads.add(n.value.id)
                targets = [n.id for t in node.targets for n in walk(t) if isinstance(n, ast.Name)]
                self.assigns.append((node, targets, loads, reads))


def _accumulates(facts: _StoreFacts, ref: str, inside: set[int]) -> bool:
    """Whether, outside the init body, the kernel stores into ``ref`` a value computed from what
    ``ref`` held (``acc[...] += x``; ``m_prev = m[...]`` ... ``m[...] = max(m_prev, x)``): the ref
    carries its value from one step to the next. A ref overwritten before it is read carries nothing."""
    assigns = [a for a in facts.assigns if id(a[0]) not in inside]
    derived: set[str] = set()
    changed = True
    while changed:  # names computed from a read of ref, through any chain of assignments
        changed = False
        for _, targets, loads, reads in assigns:
            if ref in reads or not loads.isdisjoint(derived):
                fresh = [name for name in targets if name not in derived]
                if fresh:
                    derived.update(fresh)
                    changed = True
    if any(id(node) not in inside and _reads(node, ref) for node in facts.augmented):
        return True
    return any(any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == ref
                   for t in node.targets) and (ref in reads or not loads.isdisjoint(derived))
               for node, _, loads, reads in assigns)


def _first_read(kernel: ast.AST, ref: str, when: ast.AST) -> ast.AST | None:
    reads = [n for n in walk(kernel) if _reads(n, ref) and n.lineno != when.lineno]
    return min(reads, key=lambda n: (n.lineno, n.col_offset)) if reads else None


def _entry(tree: ast.Module, site: KernelSite, axis: int, count: int) -> ast.expr | None:
    """The ``dimension_semantics`` entry of ``axis`` (a tuple or list written at its span)."""
    span = site.dimension_semantics_span
    if span is None:
        return None
    for node in index_of(tree).sequences:  # tuple and list displays, in walk order
        if node.lineno - 1 == span.line and node.col_offset == span.column and len(node.elts) == count:
            return node.elts[axis]
    return None


def _span(node: ast.AST) -> Span:
    return Span(node.lineno - 1, node.col_offset, node.end_lineno - 1, node.end_col_offset)


RULES = (parallel_carried_axis,)

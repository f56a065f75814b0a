"""The block shape a call's spec list declares, read from the source when the list is a name
(client side, Python's ``ast``; never imports jax).

Kernels often build their specs apart from the call: ``out_specs = [pl.BlockSpec((bq, d), ...), ...]``,
then ``pl.pallas_call(..., out_specs=out_specs)`` or ``grid_spec=pltpu.PrefetchScalarGridSpec(...,
in_specs=in_specs)``, sometimes with entries appended afterwards (``out_specs += [...]``). Tier 0's
site reading stops at such a name (its spec is "not certain"); when the run already told which entry of
the list is off (the worker's recorded buffers), the literal the name was first bound to still says
where that entry's dim is written: entries appended later come after the literal's, so its positions
hold. ``dim_span`` finds it, or None when anything is less clear (a starred entry before it, a name
rebound in a branch, an entry that is not a ``BlockSpec`` call with a tuple shape).
"""

from __future__ import annotations

import ast

from ...analysis import ast_units
from ...analysis.origins import callee_name, functions_around, parse
from ...analysis.types import Span


def dim_span(text: str, call: Span, role: str, index: int, dim: int, declared: tuple | None = None) -> Span | None:
    """Where dim ``dim`` of entry ``index`` of the call's ``role`` (``in_specs``, ``out_specs``,
    ``scratch_shapes``) is written. Where the entry may be either arm of an ``if``/``else``, ``declared`` (the shape
    the call ran with) keeps the arms whose written numbers it agrees with."""
    tree = parse(text)
    node = next((n for n in ast_units.index_of(tree).expressions_at(call.line, call.column)
                 if isinstance(n, ast.Call) and (callee_name(n) or "").endswith("pallas_call")), None) if tree else None
    if node is None:  # the pallas_call written at ``call`` (not the call of what it returns, which starts there too)
        return None
    scope = next((f for f in reversed(functions_around(node)) if not isinstance(f, ast.Lambda)), tree)
    specs = _keyword(node, role)
    if specs is None:
        grid_spec = _bound(_keyword(node, "grid_spec"), scope, node)
        specs = _keyword(grid_spec, role) if isinstance(grid_spec, ast.Call) else None
    entries = _entries(specs, scope, node) if specs is not None else []
    shapes = [shape for entry in (entries[index] if index < len(entries) else ())
              if (shape := _shape_of(_bound(entry, scope, node), scope, node)) is not None and dim < len(shape.elts)]
    if len(shapes) > 1 and declared is not None:
        shapes = [shape for shape in shapes if _agrees(shape, declared)]
    if len(shapes) != 1:
        return None
    e = shapes[0].elts[dim]
    return Span(e.lineno - 1, e.col_offset, (e.end_lineno or e.lineno) - 1, e.end_col_offset or e.col_offset)


def _agrees(shape: ast.Tuple | ast.List, declared: tuple) -> bool:
    """Whether every number written in ``shape`` is the declared size there (names agree with anything)."""
    return len(shape.elts) == len(declared) and all(
        not (isinstance(e, ast.Constant) and isinstance(e.value, int)) or e.value == d
        for e, d in zip(shape.elts, declared))


def one_arm(node: ast.AST | None) -> ast.AST | None:
    """``VMEM(...) if flag else None`` (a scratch buffer only some calls have): the arm that declares one."""
    if isinstance(node, ast.IfExp):
        arms = [a for a in (node.body, node.orelse) if isinstance(a, ast.Call)]
        return arms[0] if len(arms) == 1 else node
    return node


def _shape_of(spec: ast.AST | None, scope: ast.AST, use: ast.AST) -> ast.Tuple | ast.List | None:
    """The shape tuple of ``pl.BlockSpec(shape, ...)`` or a scratch buffer's ``pltpu.VMEM(shape, dtype)``."""
    spec = one_arm(spec)
    if not isinstance(spec, ast.Call):
        return None
    shape = spec.args[0] if spec.args else next((k.value for k in spec.keywords if k.arg in ("block_shape", "shape")),
                                                None)
    shape = _bound(shape, scope, use) if shape is not None else None
    return shape if isinstance(shape, (ast.Tuple, ast.List)) else None


def _entries(specs: ast.AST, scope: ast.AST, use: ast.AST) -> list[list[ast.AST]]:
    """The list's entries in order, each as the values it may hold: a literal's, then what the statements
    after the name's binding add before ``use`` (``+= [...]``, ``.append(x)``, an ``if``/``else`` whose
    branches add as many each: both values); stops at anything else that touches the name. A name bound
    to a literal in each arm of an ``if``/``else`` holds either literal's entry at each position."""
    if isinstance(specs, (ast.List, ast.Tuple)):
        return [[e] for e in specs.elts] if not any(isinstance(e, ast.Starred) for e in specs.elts) else []
    bindings = _bindings(specs, scope, use) if isinstance(specs, ast.Name) else []
    if not bindings or not all(isinstance(b.value, (ast.List, ast.Tuple)) for b in bindings):
        return []
    if len(bindings) > 1:
        literals = [_entries(b.value, scope, use) for b in bindings]
        return [sum((lit[i] for lit in literals if i < len(lit)), []) for i in range(max(map(len, literals)))]
    out = _entries(bindings[0].value, scope, use)
    body = list(getattr(scope, "body", ()))
    later = body[body.index(bindings[0]) + 1:] if bindings[0] in body else []
    for stmt in later:
        if stmt.lineno >= use.lineno or not _touches(stmt, specs.id):
            continue
        added = _added(stmt, specs.id)
        if added is None:
            break
        out += added
    return out


def _added(stmt: ast.stmt, name: str) -> list[list[ast.AST]] | None:
    """What one statement appends to list ``name``: one value list per new entry; None when unknown."""
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add):
        return [[e] for e in stmt.value.elts] if isinstance(stmt.value, (ast.List, ast.Tuple)) else None
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and callee_name(stmt.value) == "append" \
            and isinstance(stmt.value.func, ast.Attribute) and isinstance(stmt.value.func.value, ast.Name) \
            and stmt.value.func.value.id == name and len(stmt.value.args) == 1:
        return [[stmt.value.args[0]]]
    if isinstance(stmt, ast.If) and stmt.orelse:
        branches = [_branch(stmt.body, name), _branch(stmt.orelse, name)]
        if any(b is None for b in branches) or len(branches[0]) != len(branches[1]):
            return None
        return [a + b for a, b in zip(*branches)]
    return None


def _branch(body: list[ast.stmt], name: str) -> list[list[ast.AST]] | None:
    out: list[list[ast.AST]] = []
    for stmt in body:
        if _touches(stmt, name):
            added = _added(stmt, name)
            if added is None:
                return None
            out += added
    return out


def _touches(stmt: ast.stmt, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(stmt))


def _keyword(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _bound(node: ast.AST | None, scope: ast.AST, use: ast.AST) -> ast.AST | None:
    """``node`` itself, or for a name the value of its one assignment above ``use`` in ``scope``."""
    if not isinstance(node, ast.Name):
        return node
    bindings = _bindings(node, scope, use)
    return bindings[0].value if len(bindings) == 1 else None


def _bindings(name: ast.Name, scope: ast.AST, use: ast.AST) -> list[ast.Assign]:
    """The plain assignments of ``name`` in the scope (its branches included, not nested functions) above
    ``use``; none when it is a parameter of the scope or is bound some other way too (a loop, ``with``,
    an unpacking), and none unless they are one statement or the two arms of one ``if``/``else``. One
    assignment in a branch counts: the call ran, so the name was bound."""
    def binds(s: ast.stmt) -> bool:
        return isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name.id for t in s.targets)
    params = {a.arg for a in ast.walk(getattr(scope, "args", ast.arguments())) if isinstance(a, ast.arg)}
    found = [s for s in _statements(scope) if binds(s)]
    other = [s for s in _statements(scope) if not binds(s) and isinstance(s, (ast.For, ast.With, ast.Assign))
             and any(isinstance(n, ast.Name) and n.id == name.id and isinstance(n.ctx, ast.Store)
                     for t in _targets(s) for n in ast.walk(t))]
    if name.id in params or other or any(s.lineno >= use.lineno for s in found):
        return []
    if len(found) == 2:
        arms = [s for s in _statements(scope) if isinstance(s, ast.If) and found[0] in s.body and found[1] in s.orelse]
        return found if arms else []
    return found if len(found) == 1 else []


def _targets(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, ast.For):
        return [stmt.target]
    if isinstance(stmt, ast.With):
        return [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    return list(getattr(stmt, "targets", ()))


def _statements(scope: ast.AST):
    """The scope's own statements, those in ``if``/``with``/loop bodies included, not nested functions'."""
    todo = list(getattr(scope, "body", ()))
    while todo:
        stmt = todo.pop(0)
        yield stmt
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo += [s for s in getattr(stmt, field, ()) if isinstance(s, ast.stmt)
                     and not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]

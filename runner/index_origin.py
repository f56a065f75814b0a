"""Where the index of an out-of-bounds read was computed (worker side; ``ast`` only).

jax's TPU interpreter names the read that went past a buffer (the stack it kept from tracing it),
but the mistake is often where its index was made: jax's paged attention reads its page table at
``self._page_indices[self._page_indices_start_offset + i]`` in a copy-descriptor method, with an
offset computed 120 lines away in a helper (``page_offset = b * pages_per_sequence + ...``) and
handed through the descriptor's constructor. ``index_origin`` follows the read's index back along
the stack the interpreter printed (``frames``: the checked file's ``(line, function)`` pairs,
outermost first), through what only forwards a value:

- a local name assigned once, or a parameter: to the argument the caller's frame passed for it
  (the call on that frame's line: ``f(...)``, ``self.f(...)``, ``Class(...)`` for ``__init__``);
- ``self.attr``: to the ``self.attr = value`` of the class, then on from ``__init__``'s frame;
- a loop index of ``for i in range(...)`` (or a comprehension's): in bounds by construction, left out.

It stops at the first statement that computes (arithmetic, a call) or reads a table (a subscript):
that statement is the index's origin. An index that adds a constant where it is read (``start + i
+ 1``) is its own origin. None when nothing can be followed (the read is then the place).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

MAX_STEPS = 12
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


@dataclass(frozen=True)
class Origin:
    line: int  # 1-based
    column: int
    what: str  # the statement's text, shortened


def index_origin(frames: list[tuple[int, str]], tree: ast.Module | None) -> Origin | None:
    """The statement that computed the index of the read at ``frames[-1]`` (see the module doc)."""
    if tree is None or not frames:
        return None
    scopes = _Scopes(tree)
    line, name = frames[-1]
    fn = scopes.function_at(line, name)
    index = _read_index(fn, line) if fn is not None else None
    if index is None:
        return None
    found = _follow(index, len(frames) - 1, frames, scopes, _statement_at(fn, line))
    if found is None or found.lineno == line:
        return None
    text = " ".join(ast.unparse(found).split())
    return Origin(found.lineno, found.col_offset, text if len(text) <= 80 else text[:77] + "...")


class _Scopes:
    """The file's functions (and comprehensions, which have frames of their own) by line."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda, ast.ListComp,
                                                                        ast.GeneratorExp, ast.SetComp, ast.DictComp))]

    def function_at(self, line: int, name: str) -> ast.AST | None:
        """The innermost function (or comprehension, for ``<listcomp>`` frames) named ``name`` around ``line``."""
        kinds = {"<listcomp>": ast.ListComp, "<genexpr>": ast.GeneratorExp, "<setcomp>": ast.SetComp,
                 "<dictcomp>": ast.DictComp, "<lambda>": ast.Lambda}
        want = kinds.get(name, ast.FunctionDef)
        around = [f for f in self.functions if isinstance(f, want) and f.lineno <= line <= (f.end_lineno or f.lineno)
                  and (want is not ast.FunctionDef or f.name == name)]
        return max(around, key=lambda f: f.lineno) if around else None

    def class_of(self, fn: ast.AST) -> ast.ClassDef | None:
        around = [c for c in ast.walk(self.tree) if isinstance(c, ast.ClassDef) and fn in c.body]
        return around[0] if around else None


def _statement_at(fn: ast.AST, line: int) -> ast.AST:
    stmts = [s for s in ast.walk(fn) if isinstance(s, ast.stmt) and s.lineno <= line <= (s.end_lineno or s.lineno)]
    return max(stmts, key=lambda s: s.lineno) if stmts else fn


def _read_index(fn: ast.AST, line: int) -> ast.expr | None:
    """The index of the subscript read on ``line`` whose index is not a plain slice."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Subscript) and node.lineno == line and isinstance(node.ctx, ast.Load) \
                and not isinstance(node.slice, (ast.Slice, ast.Constant)):
            index = node.slice
            if isinstance(index, ast.Tuple):
                dynamic = [e for e in index.elts if not isinstance(e, (ast.Slice, ast.Constant))]
                index = dynamic[0] if len(dynamic) == 1 else None
            if index is not None:
                return index
    return None


def _follow(expr: ast.expr, at: int, frames: list[tuple[int, str]], scopes: _Scopes, stmt: ast.AST) -> ast.AST | None:
    """The statement where ``expr`` (in frame ``at``, inside statement ``stmt``) was computed."""
    for _ in range(MAX_STEPS):
        fn = scopes.function_at(*frames[at])
        if fn is None:
            return stmt
        leaves = _terms(expr)
        if leaves is None:  # a call, a table read, anything but arithmetic over names: computed here
            return stmt
        if any(isinstance(x, ast.Constant) for x in leaves) and isinstance(expr, ast.BinOp):
            return stmt  # a constant added where the index is used
        open_ = [x for x in leaves if not isinstance(x, ast.Constant) and not _loop_index(x, fn, at, frames, scopes)]
        if len(open_) != 1 or (isinstance(expr, ast.BinOp) and _is_computed_here(stmt, expr)):
            return stmt
        step = _source(open_[0], fn, at, frames, scopes)
        if step is None:
            return stmt
        expr, at, stmt = step
    return stmt


def _is_computed_here(stmt: ast.AST, expr: ast.expr) -> bool:
    """An assignment whose whole value is this arithmetic: the index is computed by this statement."""
    return isinstance(stmt, ast.Assign) and stmt.value is expr


def _terms(expr: ast.expr) -> list[ast.expr] | None:
    """The names, attributes and constants that ``expr`` adds or multiplies; None for anything else."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, _ARITH):
        left, right = _terms(expr.left), _terms(expr.right)
        return None if left is None or right is None else left + right
    if isinstance(expr, (ast.Name, ast.Attribute, ast.Constant)):
        return [expr]
    return None


def _loop_index(x: ast.expr, fn: ast.AST, at: int, frames: list[tuple[int, str]], scopes: _Scopes) -> bool:
    """A name bound by ``for x in range(...)`` (or a comprehension's) in ``fn``, or a parameter the
    caller passed such a name for."""
    if not isinstance(x, ast.Name):
        return False
    if _range_target(x.id, fn):
        return True
    if x.id in _params(fn) and at > 0:
        caller = scopes.function_at(*frames[at - 1])
        arg = _argument(caller, frames[at - 1][0], fn, x.id, scopes) if caller is not None else None
        return isinstance(arg, ast.Name) and _range_target(arg.id, caller)
    return False


def _range_target(name: str, fn: ast.AST) -> bool:
    for node in ast.walk(fn):
        loops = [(node.target, node.iter)] if isinstance(node, ast.For) else \
            [(g.target, g.iter) for g in node.generators] if isinstance(node, (ast.ListComp, ast.GeneratorExp)) else []
        for target, it in loops:
            if isinstance(target, ast.Name) and target.id == name and isinstance(it, ast.Call) \
                    and getattr(it.func, "id", "") == "range":
                return True
    return False


def _params(fn: ast.AST) -> list[str]:
    args = getattr(fn, "args", None)
    return [a.arg for a in (args.posonlyargs + args.args + args.kwonlyargs)] if isinstance(args, ast.arguments) else []


def _source(x: ast.expr, fn: ast.AST, at: int, frames: list[tuple[int, str]], scopes: _Scopes):
    """(expression, frame, statement) that ``x`` took its value from, one step back; None when unknown."""
    if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "self":
        cls = scopes.class_of(_enclosing_def(fn, scopes))
        sets = [n for n in ast.walk(cls) if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == x.attr and getattr(t.value, "id", "") == "self"
            for t in n.targets)] if cls is not None else []
        if len(sets) != 1:
            return None
        init = next((i for i in range(at, -1, -1) if frames[i][1] == "__init__"), None)
        if init is None:
            return None
        return sets[0].value, init, sets[0]
    if not isinstance(x, ast.Name):
        return None
    assigned = [n for n in ast.walk(_enclosing_def(fn, scopes)) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and n.targets[0].id == x.id]
    if len(assigned) == 1:
        return assigned[0].value, at, assigned[0]
    owner = _enclosing_def(fn, scopes)
    if assigned or x.id not in _params(owner) or at == 0:
        return None
    at_owner = next((i for i in range(at, -1, -1) if scopes.function_at(*frames[i]) is owner), at)
    if at_owner == 0:
        return None
    caller = scopes.function_at(*frames[at_owner - 1])
    line = frames[at_owner - 1][0]
    arg = _argument(caller, line, owner, x.id, scopes) if caller is not None else None
    return (arg, at_owner - 1, _statement_at(caller, line)) if arg is not None else None


def _enclosing_def(fn: ast.AST, scopes: _Scopes) -> ast.AST:
    """A comprehension's frame reads its function's names: the ``def`` around it."""
    if isinstance(fn, ast.FunctionDef):
        return fn
    around = [f for f in scopes.functions if isinstance(f, ast.FunctionDef) and f.lineno <= fn.lineno <= (f.end_lineno or 0)]
    return max(around, key=lambda f: f.lineno) if around else fn


def _argument(caller: ast.AST, line: int, callee: ast.AST, param: str, scopes: _Scopes) -> ast.expr | None:
    """What the call to ``callee`` on ``line`` of ``caller`` passes for ``param``."""
    names = {getattr(callee, "name", "")}
    if getattr(callee, "name", "") == "__init__":
        cls = scopes.class_of(callee)
        names = {cls.name} if cls is not None else set()
    params = _params(callee)
    for node in ast.walk(caller):
        if not (isinstance(node, ast.Call) and node.lineno <= line <= (node.end_lineno or node.lineno)):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if called not in names:
            continue
        bound = 1 if params[:1] == ["self"] else 0
        for k in node.keywords:
            if k.arg == param:
                return k.value
        position = params.index(param) - bound if param in params else -1
        if 0 <= position < len(node.args) and not any(isinstance(a, ast.Starred) for a in node.args[:position + 1]):
            return node.args[position]
    return None

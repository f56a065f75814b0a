"""Where a value used by a pallas_call was written: the origin of a block size, grid entry or dtype.

A block size is rarely a literal inside the BlockSpec: hand-tuned kernels read it from a dict
entry (``TUNED_PARAMS = {"block_k": 1024}``), a config dataclass field (``block_m: int = 512``),
a keyword default (``def matmul(x, y, *, block_k=256)``), or pass it down through parameters
(``matmul(x, y, block_shape=tuple(TUNED_PARAMS["block_shape"]))`` then ``l, r = block_shape``).
A finding about that value belongs where it was written; ``trace`` follows an expression there,
statically (Python's ``ast``; nothing is executed, never JAX):

    origin = trace(text, Span(...))    # the span of a dim expression in a BlockSpec
    origin.line, origin.kind, origin.what
    # 12, "dict entry", "TUNED_PARAMS['block_k'] = 1024"

Followed: literals; names bound once in the enclosing functions or at module level (tuple
unpacking included); parameters, through the file's own call sites of the function (an argument
passed there wins) or else their default; ``X["key"]``/``X[i]`` into dict, list and tuple literals;
``obj.field`` into a dataclass call's keyword or the class's field default; ``tuple(...)``,
``int(...)``, ``list(...)`` around any of these. Anything else (arithmetic, calls, loops) stops
the trace at the expression itself, so the answer is never a guess.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from .types import Span

MAX_HOPS = 12


@dataclass(frozen=True)
class Origin:
    """Where a value was written (0-based ``line``), how it got there, and what it says."""

    line: int
    column: int
    end_line: int
    end_column: int
    kind: str  # "literal" | "constant" | "local" | "dict entry" | "list entry" | "dataclass field" | "keyword default" | "argument"
    what: str  # e.g. "TUNED_PARAMS['block_k'] = 1024"
    value: object = None  # the literal's value when it is one

    @property
    def span(self) -> Span:
        return Span(self.line, self.column, self.end_line, self.end_column)


def trace(text: str, span: Span) -> Origin | None:
    """The origin of the expression at ``span`` of ``text`` (None: no expression there / no parse)."""
    tree = _parse(text)
    if tree is None:
        return None
    found = _expression_at(tree, span)
    if found is None:
        return None
    node, chain = found
    return _Tracer(tree, text).origin(node, chain)


# --------------------------------------------------------------------------- parsing


@functools.lru_cache(maxsize=16)
def _parse(text: str) -> ast.Module | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            child._pallasite_parent = parent  # type: ignore[attr-defined]
    return tree


def _expression_at(tree: ast.Module, span: Span) -> tuple[ast.expr, list[ast.AST]] | None:
    """The outermost expression starting at ``span``'s start (and not ending after its end), with
    the functions around it (innermost last)."""
    best = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.expr) or not hasattr(node, "lineno"):
            continue
        if node.lineno - 1 == span.line and node.col_offset == span.column:
            end = (node.end_lineno - 1, node.end_col_offset)
            if end <= (span.end_line, span.end_column) and (best is None or _size(node) > _size(best)):
                best = node
    if best is None:
        return None
    return best, _functions_around(best)


def _size(node: ast.AST) -> tuple[int, int]:
    return (node.end_lineno - node.lineno, node.end_col_offset - node.col_offset)


def _functions_around(node: ast.AST) -> list[ast.AST]:
    chain = []
    cur = getattr(node, "_pallasite_parent", None)
    while cur is not None:
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            chain.append(cur)
        cur = getattr(cur, "_pallasite_parent", None)
    return list(reversed(chain))


# --------------------------------------------------------------------------- the tracer


class _Tracer:
    def __init__(self, tree: ast.Module, text: str):
        self.tree = tree
        self.lines = text.splitlines()
        self.hops = 0

    # An expression in the scope of ``chain`` (functions, outermost first) -> its origin.
    def origin(self, node: ast.expr, chain: list[ast.AST], kind: str = "literal") -> Origin | None:
        self.hops += 1
        if self.hops > MAX_HOPS:
            return None
        if isinstance(node, ast.Constant):
            return self._at(node, kind, node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
            return self._at(node, kind, None)
        if isinstance(node, ast.Name):
            return self._name(node.id, chain, node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tuple", "list", "int") \
                and len(node.args) == 1:
            return self.origin(node.args[0], chain, kind)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, chain)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, chain)
        if hasattr(node, "lineno"):
            return self._at(node, "expression", None)  # computed here: this is where it is written
        return None

    def _at(self, node: ast.AST, kind: str, value: object, what: str | None = None) -> Origin:
        line = node.lineno - 1
        text = self.lines[line].strip() if 0 <= line < len(self.lines) else ""
        return Origin(line, node.col_offset, node.end_lineno - 1, node.end_col_offset, kind, what or text, value)

    # ---------------------------------------------------------------- names

    def _name(self, name: str, chain: list[ast.AST], use: ast.AST) -> Origin | None:
        for depth in range(len(chain) - 1, -1, -1):
            fn = chain[depth]
            bound = self._bound_in(fn, name)
            if bound is _MANY:
                return None
            if bound is not None:
                value, target_path = bound
                return self._follow(value, target_path, chain[: depth + 1], "local")
            param = _param(fn, name)
            if param is not None:
                return self._parameter(fn, param, chain[:depth])
        bound = self._bound_in(self.tree, name)
        if bound is _MANY or bound is None:
            return None
        value, target_path = bound
        return self._follow(value, target_path, [], "constant")

    def _follow(self, value: ast.expr, path: tuple[int, ...], chain: list[ast.AST], kind: str) -> Origin | None:
        for index in path:  # ``l, r = block_shape``: the element of what was unpacked
            value = _element(value, index)
        if isinstance(value, ast.Constant):
            return self._at(value, kind, value.value)
        return self.origin(value, chain, kind)

    def _bound_in(self, scope: ast.AST, name: str):
        """(value, unpack path) of the one assignment to ``name`` directly in ``scope``; _MANY if several."""
        found = []
        body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
        for stmt in _statements(body):
            targets: list[tuple[ast.expr, ast.expr]] = []
            if isinstance(stmt, ast.Assign):
                targets = [(t, stmt.value) for t in stmt.targets]
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                targets = [(stmt.target, stmt.value)]
            elif isinstance(stmt, (ast.AugAssign, ast.For, ast.With)) and name in _names_in(stmt):
                return _MANY
            for target, value in targets:
                path = _path_to(target, name)
                if path is not None:
                    found.append((value, path))
        if len(found) > 1:
            return _MANY
        return found[0] if found else None

    def _parameter(self, fn: ast.AST, param: tuple[ast.arg, ast.expr | None, int | None], outer: list[ast.AST]) -> Origin | None:
        arg, default, position = param
        name = getattr(fn, "name", None)
        passed = self._arguments_at_call_sites(name, arg.arg, position) if name else []
        if len(passed) == 1:
            value, caller_chain = passed[0]
            return self.origin(value, caller_chain, "argument")
        if not passed and default is not None:
            if isinstance(default, ast.Constant):
                return self._at(default, "keyword default", default.value,
                                what=f"{arg.arg}={ast.unparse(default)} (default of {name}(), line {arg.lineno})")
            return self.origin(default, outer, "keyword default")
        if not passed and arg.annotation is not None:
            return None
        return None

    def _arguments_at_call_sites(self, fn_name: str, param: str, position: int | None) -> list[tuple[ast.expr, list[ast.AST]]]:
        out = []
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Call):
                continue
            callee = node.func.id if isinstance(node.func, ast.Name) else (
                node.func.attr if isinstance(node.func, ast.Attribute) else None)
            if callee != fn_name:
                continue
            value = next((k.value for k in node.keywords if k.arg == param), None)
            for splat in (k for k in node.keywords if k.arg is None and value is None):  # f(**TUNED)
                found = self._container(splat.value, _functions_around(node))
                if found is not None and isinstance(found[0], ast.Dict):
                    value = next((v for k, v in zip(found[0].keys, found[0].values)
                                  if isinstance(k, ast.Constant) and k.value == param), None)
                    if value is not None:
                        out.append((value, found[1]))
                        value = None
                        break
            else:
                pass
            if value is None and position is not None and position < len(node.args) and \
                    not any(isinstance(a, ast.Starred) for a in node.args[: position + 1]):
                value = node.args[position]
            if value is not None:
                out.append((value, _functions_around(node)))
        return out

    # ---------------------------------------------------------------- containers

    def _subscript(self, node: ast.Subscript, chain: list[ast.AST]) -> Origin | None:
        key = node.slice
        if not isinstance(key, ast.Constant):
            return self._at(node, "expression", None)
        container = self._container(node.value, chain)
        if container is None:
            return self._at(node, "expression", None)
        holder, holder_chain, label = container
        if isinstance(holder, ast.Dict):
            for k, v in zip(holder.keys, holder.values):
                if isinstance(k, ast.Constant) and k.value == key.value:
                    where = self.origin(v, holder_chain, "dict entry")
                    if where is not None and where.kind == "dict entry" and isinstance(v, ast.Constant):
                        return self._at(v, "dict entry", v.value, what=f"{label}[{key.value!r}] = {ast.unparse(v)}")
                    return where
            return None
        if isinstance(holder, (ast.Tuple, ast.List)) and isinstance(key.value, int) and -len(holder.elts) <= key.value < len(holder.elts):
            element = holder.elts[key.value]
            where = self.origin(element, holder_chain, "list entry")
            if where is not None and isinstance(element, ast.Constant):
                return self._at(element, "list entry", element.value, what=f"{label}[{key.value}] = {ast.unparse(element)}")
            return where
        return None

    def _container(self, node: ast.expr, chain: list[ast.AST], depth: int = 0):
        """The dict/list/tuple literal ``node`` stands for, its scope, and a label; None if unknown."""
        if depth > MAX_HOPS:
            return None
        if isinstance(node, (ast.Dict, ast.Tuple, ast.List)):
            return node, chain, ast.unparse(node)[:30]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tuple", "list") and len(node.args) == 1:
            return self._container(node.args[0], chain, depth + 1)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            outer = self._container(node.value, chain, depth + 1)
            if outer is None:
                return None
            holder, holder_chain, label = outer
            inner = None
            if isinstance(holder, ast.Dict):
                inner = next((v for k, v in zip(holder.keys, holder.values)
                              if isinstance(k, ast.Constant) and k.value == node.slice.value), None)
            elif isinstance(holder, (ast.Tuple, ast.List)) and isinstance(node.slice.value, int) \
                    and -len(holder.elts) <= node.slice.value < len(holder.elts):
                inner = holder.elts[node.slice.value]
            if inner is None:
                return None
            return self._container(inner, holder_chain, depth + 1) if not isinstance(inner, (ast.Dict, ast.Tuple, ast.List)) \
                else (inner, holder_chain, f"{label}[{node.slice.value!r}]")
        if isinstance(node, ast.Name):
            value, value_chain = self._value_of_name(node.id, chain)
            if value is None:
                return None
            found = self._container(value, value_chain, depth + 1)
            if found is not None and isinstance(value, (ast.Dict, ast.Tuple, ast.List)):
                return found[0], found[1], node.id
            return found
        return None

    def _value_of_name(self, name: str, chain: list[ast.AST]) -> tuple[ast.expr | None, list[ast.AST]]:
        """The one expression bound to ``name`` (an assignment, or the argument passed for a parameter)."""
        for depth in range(len(chain) - 1, -1, -1):
            fn = chain[depth]
            bound = self._bound_in(fn, name)
            if bound is _MANY:
                return None, []
            if bound is not None:
                value, path = bound
                for index in path:
                    value = _element(value, index)
                return value, chain[: depth + 1]
            param = _param(fn, name)
            if param is not None:
                passed = self._arguments_at_call_sites(getattr(fn, "name", ""), param[0].arg, param[2])
                if len(passed) == 1:
                    return passed[0]
                if not passed and param[1] is not None:
                    return param[1], chain[:depth]
                return None, []
        bound = self._bound_in(self.tree, name)
        if bound is None or bound is _MANY:
            return None, []
        value, path = bound
        for index in path:
            value = _element(value, index)
        return value, []

    # ---------------------------------------------------------------- dataclasses

    def _attribute(self, node: ast.Attribute, chain: list[ast.AST]) -> Origin | None:
        field_name = node.attr
        cls, made = self._instance_class(node.value, chain)
        if cls is None:
            return self._at(node, "expression", None)
        if made is not None:  # Config(block_m=256): the keyword wins over the field default
            value = next((k.value for k in made.keywords if k.arg == field_name), None)
            if value is not None:
                return self.origin(value, _functions_around(made), "argument")
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == field_name \
                    and stmt.value is not None:
                if isinstance(stmt.value, ast.Constant):
                    return self._at(stmt.value, "dataclass field", stmt.value.value,
                                    what=f"{cls.name}.{field_name} = {ast.unparse(stmt.value)}")
                return self.origin(stmt.value, [], "dataclass field")
        return None

    def _instance_class(self, node: ast.expr, chain: list[ast.AST]) -> tuple[ast.ClassDef | None, ast.Call | None]:
        """The class of the file that ``node`` is an instance of, and the call that made it (if seen)."""
        classes = {c.name: c for c in self.tree.body if isinstance(c, ast.ClassDef)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes:
            return classes[node.func.id], node
        if not isinstance(node, ast.Name):
            return None, None
        value, value_chain = self._value_of_name(node.id, chain)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in classes:
            return classes[value.func.id], value
        for fn in reversed(chain):  # a parameter annotated with the class: its field defaults
            param = _param(fn, node.id)
            if param is not None:
                annotation = param[0].annotation
                if isinstance(annotation, ast.Name) and annotation.id in classes:
                    return classes[annotation.id], None
                break
        if isinstance(value, ast.Name) and value.id != node.id:
            return self._instance_class(value, value_chain)
        return None, None


_MANY = object()


def _element(value: ast.expr, index: int) -> ast.expr:
    """``value[index]`` as a node placed where ``value`` is written (for unpacking ``l, r = shape``)."""
    if isinstance(value, (ast.Tuple, ast.List)) and -len(value.elts) <= index < len(value.elts):
        return value.elts[index]
    return ast.copy_location(ast.Subscript(value=value, slice=ast.copy_location(ast.Constant(index), value)), value)


def _statements(body: list[ast.stmt]):
    """Statements of a body, including those nested in if/try blocks (not in nested functions)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try)):
            for block in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", []), *[h.body for h in getattr(stmt, "handlers", [])]):
                yield from _statements(block)


def _names_in(stmt: ast.stmt) -> set[str]:
    target = getattr(stmt, "target", None)
    items = getattr(stmt, "items", None) or []
    nodes = [target] + [i.optional_vars for i in items]
    return {n.id for t in nodes if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _path_to(target: ast.expr, name: str) -> tuple[int, ...] | None:
    """The unpacking path of ``name`` in an assignment target (``()`` for ``name = ...``)."""
    if isinstance(target, ast.Name):
        return () if target.id == name else None
    if isinstance(target, (ast.Tuple, ast.List)):
        for i, element in enumerate(target.elts):
            sub = _path_to(element, name)
            if sub is not None:
                return (i,) + sub
    return None


def _param(fn: ast.AST, name: str) -> tuple[ast.arg, ast.expr | None, int | None] | None:
    """(arg, default, position) of parameter ``name`` of ``fn`` (position None: keyword-only)."""
    args = getattr(fn, "args", None)
    if args is None:
        return None
    positional = list(args.posonlyargs) + list(args.args)
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        if arg.arg == name:
            return arg, default, i
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if arg.arg == name:
            return arg, default, None
    return None

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

Followed (an intra-file data-flow over the syntax tree):

- literals; names bound once in the enclosing functions or at module level, tuple unpacking
  included (``l, r = block_shape``), or bound once and then replaced under an ``if``/``try``
  (``n = num_queries_per_block`` then ``if n is None: n = lookup(...)``: the branch that writes a
  value wins over the one that computes it);
- parameters: the argument passed at the file's one call site of the function — through
  ``functools.partial(f, ...)`` and ``jax.jit(f, static_argnames=...)`` aliases too, keywords,
  positions and ``**dict`` splats — else the parameter's default; given the traceback's frames of
  the file (``frames``), the call the failing run actually made wins over the others;
- ``X["key"]`` / ``X[i]`` into dict, list and tuple literals; ``tuple(...)``, ``list(...)``,
  ``int(...)`` around any of these;
- ``obj.field`` into a dataclass (or NamedTuple) call's keyword, a ``**dict`` splat into it, the
  class's field default, or the one constructor call a function or classmethod returns;
- a call of a function of the file with one ``return``: the returned expression, its parameters
  bound by that call;
- simple arithmetic with one non-literal operand (``bq * 2``, ``block - 8``, ``n // bk``): the
  operand that is not a literal;
- ``min(block_q, seq_len)`` / ``max(...)``: the one argument that traces to a written value,
  marked ``chosen`` (the call may have taken the other one: a finding moves there only when the
  value it names is that one);
- ``config.get("block_q", 128)`` on a dict: its entry, else the default given; a keyword passed
  on through a wrapper's ``**options`` (``def wrapper(x, **options): return f(x, **options)``):
  the keyword given where the wrapper is called;
- ``self.block_rows`` in a method: the class's one ``self.block_rows = ...``, and a constructor
  parameter there to the argument where the class is called (else its default).

Anything else (several assignments, loops, calls into other modules) stops the trace at the
expression itself (kind "expression"), so the answer is never a guess. ``branch_block_shapes``
lists the BlockSpecs a name of ``in_specs`` may stand for when a branch chooses between them.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from dataclasses import dataclass

from . import ast_units
from .types import Span

MAX_HOPS = 24
Frames = tuple[tuple[int, str], ...]  # (1-based line, function name) of the file's traceback frames, outermost first


@dataclass(frozen=True)
class Origin:
    """Where a value was written (0-based ``line``), how it got there, and what it says."""

    line: int
    column: int
    end_line: int
    end_column: int
    kind: str  # "literal" | "constant" | "local" | "dict entry" | "list entry" | "dataclass field" | "keyword default" | "argument" | "expression"
    what: str  # e.g. "TUNED_PARAMS['block_k'] = 1024"
    value: object = None  # the literal's value when it is one
    exact: bool = True  # False when arithmetic lies between this value and the traced expression
    chosen: bool = False  # min()/max() lay between: the value holds only where it is the one the run saw

    @property
    def span(self) -> Span:
        return Span(self.line, self.column, self.end_line, self.end_column)


def trace(text: str, span: Span, *, frames: Frames = (), tree: ast.Module | None = None) -> Origin | None:
    """The origin of the expression at ``span`` of ``text`` (None: no expression there / no parse);
    ``tree``: the text's module when the caller has it (tier 0's, ``ast_units``)."""
    tree = tree if tree is not None else parse(text)
    if tree is None:
        return None
    found = _expression_at(tree, span)
    if found is None:
        return None
    return trace_node(tree, text, found, frames=frames)


def trace_node(tree: ast.Module, text: str, node: ast.expr, *, frames: Frames = ()) -> Origin | None:
    """The origin of ``node`` (an expression of ``parse(text)``)."""
    return Tracer(tree, text, frames).origin(node, functions_around(node))


def branch_block_shapes(text: str, span: Span) -> list[tuple[ast.Call, list[ast.expr]]]:
    """When the expression at ``span`` (an ``in_specs``/``out_specs`` entry) is a name bound to a
    BlockSpec in several places of its scope (``y_spec = pl.BlockSpec(...)`` in both arms of an
    ``if``): each of those BlockSpec calls with its block-shape elements ([] when not that case)."""
    tree = parse(text)
    if tree is None:
        return []
    node = _expression_at(tree, span)
    if not isinstance(node, ast.Name):
        return []
    for scope in list(reversed(functions_around(node))) + [tree]:
        body = getattr(scope, "body", None)
        if not isinstance(body, list):
            continue
        assigned = [stmt.value for stmt, _ in _statements(body) if isinstance(stmt, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == node.id for t in stmt.targets)]
        if assigned:
            break
    else:
        return []
    out = []
    for value in assigned:
        if isinstance(value, ast.Call) and callee_name(value) == "BlockSpec":
            shape = value.args[0] if value.args else next((k.value for k in value.keywords if k.arg == "block_shape"), None)
            if isinstance(shape, (ast.Tuple, ast.List)):
                out.append((value, list(shape.elts)))
    return out


# --------------------------------------------------------------------------- parsing


@functools.lru_cache(maxsize=4)
def parse(text: str) -> ast.Module | None:
    """``text``'s syntax tree with parent links and its index (``ast_units``; cached, a few texts:
    a 2,700-line file's tree holds megabytes; None when it does not parse)."""
    return ast_units.whole(text)


def parent_of(node: ast.AST) -> ast.AST | None:
    return getattr(node, "_pallasite_parent", None)


def _expression_at(tree: ast.Module, span: Span) -> ast.expr | None:
    """The outermost expression starting at ``span``'s start (and not ending after its end)."""
    best = None
    for node in ast_units.index_of(tree).expressions_at(span.line, span.column):  # in walk order
        end = (node.end_lineno - 1, node.end_col_offset)
        if end <= (span.end_line, span.end_column) and (best is None or _size(node) > _size(best)):
            best = node
    return best


def _size(node: ast.AST) -> tuple[int, int]:
    return (node.end_lineno - node.lineno, node.end_col_offset - node.col_offset)


def functions_around(node: ast.AST) -> list[ast.AST]:
    """The functions (and lambdas) enclosing ``node``, outermost first."""
    chain = []
    cur = parent_of(node)
    while cur is not None:
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            chain.append(cur)
        cur = parent_of(cur)
    return list(reversed(chain))


def callee_name(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


# --------------------------------------------------------------------------- the tracer


class Tracer:
    """One trace over a file's tree: ``origin(node, chain)`` where a value was written, ``binding``
    what a name is bound to in a scope, ``place`` an Origin at a node."""

    def __init__(self, tree: ast.Module, text: str, frames: Frames = ()):
        self.tree = tree
        self.lines = text.splitlines()
        self.frames = tuple(frames)
        self.hops = 0
        self.entered: dict[int, tuple[ast.Call, int]] = {}  # id(function) -> (the call the trace entered it by, shift)
        index = self.index = ast_units.index_of(tree)  # file-wide lookups, kept per unit of the file
        self.defs = index.defs
        self.classes = {c.name: c for c in index.classes}
        self.imported = {(a.asname or a.name).split(".")[0] for n in index.imports for a in n.names}

    # An expression in the scope of ``chain`` (functions, outermost first) -> its origin.
    def origin(self, node: ast.expr, chain: list[ast.AST], kind: str = "literal") -> Origin | None:
        self.hops += 1
        if self.hops > MAX_HOPS:
            return None
        if isinstance(node, ast.Constant):
            return self.place(node, kind, node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
            return self.place(node, kind, None)
        if isinstance(node, ast.Name):
            return self._name(node.id, chain, node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tuple", "list", "int") \
                and len(node.args) == 1:
            return self.origin(node.args[0], chain, kind)
        if isinstance(node, ast.Subscript):
            return self._subscript(node, chain)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, chain, kind)
        if isinstance(node, ast.BinOp):
            return self._arithmetic(node, chain, kind)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
                and len(node.args) >= 2 and not node.keywords and not self._rebound(node.func.id, chain):
            return self._chosen(node, chain, kind)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and 1 <= len(node.args) <= 2 and isinstance(node.args[0], ast.Constant) and not node.keywords:
            found = self._dict_get(node, chain)
            if found is not None:
                return found
        if isinstance(node, ast.Call):
            returned = self.returned(node, chain)
            if returned is not None:
                return self.origin(*returned, kind)
        if hasattr(node, "lineno"):
            return self.place(node, "expression", None)  # computed here: this is where it is written
        return None

    def place(self, node: ast.AST, kind: str, value: object, what: str | None = None) -> Origin:
        line = node.lineno - 1
        text = self.lines[line].strip() if 0 <= line < len(self.lines) else ""
        return Origin(line, node.col_offset, node.end_lineno - 1, node.end_col_offset, kind, what or text, value)

    def _arithmetic(self, node: ast.BinOp, chain: list[ast.AST], kind: str) -> Origin | None:
        """``bq * 2``: the operand that is not a literal (one only), else the expression itself."""
        operands = [x for x in (node.left, node.right) if not isinstance(x, ast.Constant)]
        if len(operands) == 1:
            found = self.origin(operands[0], chain, kind)
            if found is not None and found.kind != "expression":
                return dataclasses.replace(found, exact=False)
        return self.place(node, "expression", None)

    def _chosen(self, node: ast.Call, chain: list[ast.AST], kind: str) -> Origin | None:
        """``min(block_q, seq_len)``: the one argument that traces to a written value (the others
        are computed, e.g. a shape), marked ``chosen`` and not exact; else the call itself."""
        found = [self.origin(a, chain, kind) for a in node.args]
        written = [o for o in found if o is not None and o.kind != "expression"]
        if len(written) == 1 and len(found) == len(node.args):
            return dataclasses.replace(written[0], exact=False, chosen=True)
        return self.place(node, "expression", None)

    def _rebound(self, name: str, chain: list[ast.AST]) -> bool:
        """Whether a builtin's ``name`` is bound in the file (a parameter, local or module name)."""
        return name in self.imported or any(_param(fn, name) or _bound_in(fn, name) for fn in chain) \
            or bool(_bound_in(self.tree, name))

    # ---------------------------------------------------------------- names

    def _name(self, name: str, chain: list[ast.AST], use: ast.AST) -> Origin | None:
        alternatives = self._bindings(name, chain)
        found = [self._bound_origin(b) for b in alternatives]
        if len(found) == 1:
            return found[0]
        written = [o for o in found if o is not None and o.kind != "expression"]
        return written[0] if len(written) == 1 else None  # one branch computes it, the other writes it

    def _bound_origin(self, bound: _Bound) -> Origin | None:
        if isinstance(bound.value, ast.Constant):
            return self.place(bound.value, bound.kind, bound.value.value, what=bound.what)
        return self.origin(bound.value, bound.chain, bound.kind)

    def binding(self, name: str, chain: list[ast.AST]) -> _Bound | None:
        """The one expression bound to ``name`` in ``chain``'s scope (the first of alternatives)."""
        alternatives = self._bindings(name, chain)
        return alternatives[0] if alternatives else None

    def _bindings(self, name: str, chain: list[ast.AST]) -> list[_Bound]:
        """What ``name`` is bound to in ``chain``'s scope: one binding, or two when an assignment
        under an ``if``/``try`` may replace a parameter or an earlier value; [] when unknown."""
        for depth in range(len(chain) - 1, -1, -1):
            fn = chain[depth]
            bound = _bound_alternatives(fn, name)
            param = _param(fn, name)
            if bound is _MANY:
                return []
            if bound:
                here = [_Bound(_element_path(value, path), chain[: depth + 1], "local") for value, path, _ in bound]
                if all(conditional for _, _, conditional in bound) and param is not None:
                    other = self._parameter(fn, param, chain[:depth])
                    return here + ([other] if other is not None else [])
                return here
            if param is not None:
                found = self._parameter(fn, param, chain[:depth])
                return [found] if found is not None else []
        bound = _bound_alternatives(self.tree, name)
        if bound is _MANY or not bound:
            return []
        return [_Bound(_element_path(value, path), [], "constant") for value, path, _ in bound]

    def _parameter(self, fn: ast.AST, param: tuple[ast.arg, ast.expr | None, int | None],
                   outer: list[ast.AST]) -> _Bound | None:
        arg, default, position = param
        entered = self.entered.get(id(fn))
        if entered is not None:
            found = self._argument(entered[0], fn, arg.arg, position, entered[1])
            passed = [found] if found is not None else []
        else:
            passed = self._arguments_at_call_sites(fn, arg.arg, position)
        if len(passed) == 1:
            value, caller_chain = passed[0]
            return _Bound(value, caller_chain, "argument")
        if not passed and default is not None:
            what = (f"{arg.arg}={ast.unparse(default)} (default of {getattr(fn, 'name', 'the function')}(), "
                    f"line {arg.lineno})")
            return _Bound(default, outer, "keyword default", what if isinstance(default, ast.Constant) else None)
        return None

    def _argument(self, call: ast.Call, fn: ast.AST, param: str, position: int | None,
                  shift: int = 0) -> tuple[ast.expr, list[ast.AST]] | None:
        """The expression ``call`` passes for parameter ``param`` of ``fn`` (None when it does not)."""
        value = next((k.value for k in call.keywords if k.arg == param), None)
        if value is not None:
            return value, functions_around(call)
        for splat in (k for k in call.keywords if k.arg is None):  # f(**TUNED)
            around = functions_around(call)
            found = self._container(splat.value, around)
            if found is not None and isinstance(found[0], ast.Dict):
                entry = _dict_entry(found[0], param)
                if entry is not None:
                    return entry, found[1]
            outer = around[-1] if around else None
            kwarg = getattr(getattr(outer, "args", None), "kwarg", None)
            if found is None and isinstance(splat.value, ast.Name) and kwarg is not None and kwarg.arg == splat.value.id \
                    and not _bound_in(outer, splat.value.id):  # def wrapper(x, **options): f(x, **options)
                passed = self._arguments_at_call_sites(outer, param, None)
                if len(passed) == 1:
                    return passed[0]
        if position is not None:
            index = position - shift - _bound_self(fn)
            if 0 <= index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
                return call.args[index], functions_around(call)
        return None

    def _arguments_at_call_sites(self, fn: ast.AST, param: str, position: int | None) -> list[tuple[ast.expr, list[ast.AST]]]:
        """What the file's calls of ``fn`` pass for ``param``: the call of the traceback's frames when
        they name one; else every call site (by name, or through a partial/jit alias)."""
        name = getattr(fn, "name", None)
        if not name:
            return []
        if name == "__init__" and isinstance(parent_of(fn), ast.ClassDef):
            name = parent_of(fn).name  # a constructor's arguments are passed where the class is called
        sites = list(self._call_sites(name))
        framed = self._framed_call(name, sites)
        if framed is not None:
            self.entered[id(fn)] = framed
            sites = [framed]
        found: dict[int, tuple[ast.expr, list[ast.AST]]] = {}
        for call, shift in sites:
            passed = self._argument(call, fn, param, position, shift)
            if passed is not None:
                found.setdefault(id(passed[0]), passed)  # a partial's keyword is seen at each call of it
        return list(found.values())

    def _call_sites(self, name: str):
        """(call, positional shift) for every call of function ``name`` in the file: direct calls,
        ``functools.partial(name, ...)`` (its own arguments), and calls of names bound to
        ``functools.partial(name, ...)`` or ``jax.jit(name, ...)``."""
        aliases: dict[str, tuple[int, ast.Call | None]] = {name: (0, None)}
        for node in self.index.assigns:
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                    and isinstance(node.value, ast.Call) and callee_name(node.value) in ("partial", "jit") \
                    and node.value.args and isinstance(node.value.args[0], ast.Name) and node.value.args[0].id == name:
                wrapper = node.value
                shift = len(wrapper.args) - 1 if callee_name(wrapper) == "partial" else 0
                aliases[node.targets[0].id] = (shift, wrapper)
        for node in self.index.calls:
            called = callee_name(node)
            if called in ("partial", "jit") and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == name:
                partial_call = ast.Call(func=node.func, args=node.args[1:], keywords=node.keywords)
                ast.copy_location(partial_call, node)
                partial_call.end_lineno, partial_call.end_col_offset = node.end_lineno, node.end_col_offset
                partial_call._pallasite_parent = parent_of(node)  # type: ignore[attr-defined]
                yield partial_call, 0
            elif isinstance(node.func, ast.Name) and node.func.id in aliases:
                shift, wrapper = aliases[node.func.id]
                if wrapper is not None and wrapper.keywords and callee_name(wrapper) == "partial":
                    merged = ast.Call(func=node.func, args=node.args, keywords=list(wrapper.keywords) + list(node.keywords))
                    ast.copy_location(merged, node)
                    merged.end_lineno, merged.end_col_offset = node.end_lineno, node.end_col_offset
                    merged._pallasite_parent = parent_of(node)  # type: ignore[attr-defined]
                    yield merged, shift
                else:
                    yield node, shift
            elif isinstance(node.func, ast.Attribute) and node.func.attr == name:
                yield node, 0

    def _framed_call(self, name: str, sites: list[tuple[ast.Call, int]]) -> tuple[ast.Call, int] | None:
        """The call site on the traceback: the caller's frame line, just outside ``name``'s frame."""
        for i in range(len(self.frames) - 1, 0, -1):
            if self.frames[i][1] != name:
                continue
            line = self.frames[i - 1][0]
            here = [s for s in sites if s[0].lineno <= line <= s[0].end_lineno]
            if len(here) == 1:
                return here[0]
        return None

    # ---------------------------------------------------------------- calls of the file's functions

    def returned(self, call: ast.Call, chain: list[ast.AST]) -> tuple[ast.expr, list[ast.AST]] | None:
        """For a call of a function of this file with one ``return``: the returned expression (the
        function entered through this call, so its parameters resolve to this call's arguments)."""
        fn = self._function_called(call)
        if fn is None:
            return None
        returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None
                   and functions_around(n)[-1:] == [fn]]
        if len(returns) != 1:
            return None
        self.entered[id(fn)] = (call, 0)
        return returns[0].value, functions_around(returns[0])

    def _function_called(self, call: ast.Call) -> ast.AST | None:
        name = callee_name(call)
        if name is None or name in self.classes:
            return None
        if isinstance(call.func, ast.Attribute):
            owner = call.func.value
            cls = self.classes.get(owner.id) if isinstance(owner, ast.Name) else None
            if cls is None:
                return None  # a method of an object of another module
            found = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
        else:
            found = [d for d in self.defs if d.name == name and isinstance(parent_of(d), ast.Module)]
        return found[0] if len(found) == 1 else None

    # ---------------------------------------------------------------- containers

    def _subscript(self, node: ast.Subscript, chain: list[ast.AST]) -> Origin | None:
        key = node.slice
        if not isinstance(key, ast.Constant):
            return self.place(node, "expression", None)
        container = self._container(node.value, chain)
        if container is None:
            return self.place(node, "expression", None)
        holder, holder_chain, label = container
        if isinstance(holder, ast.Dict):
            v = _dict_entry(holder, key.value)
            if v is None:
                return None
            if isinstance(v, ast.Constant):
                return self.place(v, "dict entry", v.value, what=f"{label}[{key.value!r}] = {ast.unparse(v)}")
            return self.origin(v, holder_chain, "dict entry")
        if isinstance(holder, (ast.Tuple, ast.List)) and isinstance(key.value, int) and -len(holder.elts) <= key.value < len(holder.elts):
            element = holder.elts[key.value]
            if isinstance(element, ast.Constant):
                return self.place(element, "list entry", element.value, what=f"{label}[{key.value}] = {ast.unparse(element)}")
            return self.origin(element, holder_chain, "list entry")
        return None

    def _dict_get(self, node: ast.Call, chain: list[ast.AST]) -> Origin | None:
        """``config.get("block_q", 128)`` on a dict of the file: its entry, else the default given."""
        container = self._container(node.func.value, chain)
        if container is None or not isinstance(container[0], ast.Dict):
            return None
        holder, holder_chain, label = container
        key = node.args[0].value
        v = _dict_entry(holder, key)
        if v is None:
            return self.origin(node.args[1], chain, "argument") if len(node.args) == 2 else None
        if isinstance(v, ast.Constant):
            return self.place(v, "dict entry", v.value, what=f"{label}[{key!r}] = {ast.unparse(v)}")
        return self.origin(v, holder_chain, "dict entry")

    def _container(self, node: ast.expr, chain: list[ast.AST], depth: int = 0):
        """The dict/list/tuple literal ``node`` stands for, its scope, and a label; None if unknown."""
        if depth > MAX_HOPS:
            return None
        if isinstance(node, (ast.Dict, ast.Tuple, ast.List)):
            return node, chain, ast.unparse(node)[:30]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tuple", "list") and len(node.args) == 1:
            return self._container(node.args[0], chain, depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
            made = ast.Dict(keys=[ast.Constant(k.arg) for k in node.keywords], values=[k.value for k in node.keywords])
            return made, chain, "dict(...)"
        if isinstance(node, ast.Call):
            returned = self.returned(node, chain)
            if returned is not None:
                return self._container(returned[0], returned[1], depth + 1)
            return None
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            outer = self._container(node.value, chain, depth + 1)
            if outer is None:
                return None
            holder, holder_chain, label = outer
            inner = None
            if isinstance(holder, ast.Dict):
                inner = _dict_entry(holder, node.slice.value)
            elif isinstance(holder, (ast.Tuple, ast.List)) and isinstance(node.slice.value, int) \
                    and -len(holder.elts) <= node.slice.value < len(holder.elts):
                inner = holder.elts[node.slice.value]
            if inner is None:
                return None
            return self._container(inner, holder_chain, depth + 1) if not isinstance(inner, (ast.Dict, ast.Tuple, ast.List)) \
                else (inner, holder_chain, f"{label}[{node.slice.value!r}]")
        if isinstance(node, ast.Name):
            resolved = []
            for bound in self._bindings(node.id, chain):
                found = self._container(bound.value, bound.chain, depth + 1)
                if found is not None and isinstance(bound.value, (ast.Dict, ast.Tuple, ast.List)):
                    found = (found[0], found[1], node.id)
                if found is not None:
                    resolved.append(found)
            return resolved[0] if len(resolved) == 1 else None
        return None

    # ---------------------------------------------------------------- dataclasses

    def _attribute(self, node: ast.Attribute, chain: list[ast.AST], kind: str = "literal") -> Origin | None:
        field_name = node.attr
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.imported and not any(
                _param(fn, root.id) or _bound_in(fn, root.id) for fn in chain):
            return self.place(node, kind, ast.unparse(node))  # ``jnp.int32``: a value written here
        cls, made, made_chain = self._instance_class(node.value, chain)
        if cls is None:
            owner = self._own_class(node.value, chain)  # ``self.block_rows`` inside a method
            if owner is None:
                return self.place(node, "expression", None)
            assigned = [(stmt.value, functions_around(stmt)) for stmt in ast.walk(owner)
                        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None
                        and any(_is_self_attr(t, field_name) for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]))]
            if len(assigned) == 1:
                value, where = assigned[0]
                return self.origin(value, where, "literal")
            if assigned:
                return self.place(node, "expression", None)
            cls = owner  # no assignment: a dataclass field's default, below
        if made is not None:  # Config(block_m=256): the keyword wins over the field default
            value = next((k.value for k in made.keywords if k.arg == field_name), None)
            if value is not None:
                return self.origin(value, made_chain, "argument")
            for splat in (k for k in made.keywords if k.arg is None):  # Config(**TUNED)
                found = self._container(splat.value, made_chain)
                if found is not None and isinstance(found[0], ast.Dict):
                    entry = _dict_entry(found[0], field_name)
                    if entry is not None:
                        if isinstance(entry, ast.Constant):
                            return self.place(entry, "dict entry", entry.value,
                                            what=f"{found[2]}[{field_name!r}] = {ast.unparse(entry)}")
                        return self.origin(entry, found[1], "dict entry")
            fields = _class_fields(cls)
            if field_name in fields and not any(k.arg is None for k in made.keywords):
                index = fields.index(field_name)
                if index < len(made.args) and not any(isinstance(a, ast.Starred) for a in made.args[: index + 1]):
                    return self.origin(made.args[index], made_chain, "argument")
        for stmt in cls.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == field_name \
                    and stmt.value is not None:
                if isinstance(stmt.value, ast.Constant):
                    return self.place(stmt.value, "dataclass field", stmt.value.value,
                                    what=f"{cls.name}.{field_name} = {ast.unparse(stmt.value)}")
                return self.origin(stmt.value, [], "dataclass field")
        return self.place(node, "expression", None)

    def _own_class(self, node: ast.expr, chain: list[ast.AST]) -> ast.ClassDef | None:
        """The class of the file whose method ``chain`` is in, when ``node`` is that method's first
        parameter (``self``) and it is not rebound there."""
        if not isinstance(node, ast.Name) or not chain:
            return None
        method = chain[-1]
        cls = parent_of(method)
        if not isinstance(cls, ast.ClassDef) or not _bound_self(method):
            return None
        args = getattr(method, "args", None)
        first = (args.posonlyargs + args.args)[:1] if args is not None else []
        if not first or first[0].arg != node.id or _bound_in(method, node.id):
            return None
        return cls

    def _instance_class(self, node: ast.expr, chain: list[ast.AST], depth: int = 0) -> tuple[ast.ClassDef | None, ast.Call | None, list[ast.AST]]:
        """The class of the file that ``node`` is an instance of, the call that made it (if seen),
        and that call's scope."""
        if depth > 6:
            return None, None, []
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in self.classes:
                return self.classes[node.func.id], node, chain
            returned = self.returned(node, chain)  # BlockSizes.get_default(...), make_config(...)
            if returned is not None:
                return self._instance_class(returned[0], returned[1], depth + 1)
            return None, None, []
        if not isinstance(node, ast.Name):
            return None, None, []
        for bound in self._bindings(node.id, chain):
            if isinstance(bound.value, ast.Name) and bound.value.id == node.id:
                continue
            cls, made, made_chain = self._instance_class(bound.value, bound.chain, depth + 1)
            if cls is not None:
                return cls, made, made_chain
        for fn in reversed(chain):  # a parameter annotated with the class: its field defaults
            param = _param(fn, node.id)
            if param is not None:
                annotation = param[0].annotation
                names = {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)} if annotation is not None else set()
                known = [n for n in names if n in self.classes]
                if len(known) == 1:
                    return self.classes[known[0]], None, []
                break
        return None, None, []


_MANY = object()


@dataclass(frozen=True)
class _Bound:
    value: ast.expr
    chain: list
    kind: str
    what: str | None = None


def _is_self_attr(target: ast.AST, field_name: str) -> bool:
    return isinstance(target, ast.Attribute) and target.attr == field_name and isinstance(target.value, ast.Name) \
        and target.value.id in ("self", "cls")


def _dict_entry(holder: ast.Dict, key: object) -> ast.expr | None:
    for k, v in zip(holder.keys, holder.values):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


def _bound_self(fn: ast.AST) -> int:
    """1 for a method or classmethod (``self``/``cls`` is not passed by position), else 0."""
    if not isinstance(parent_of(fn), ast.ClassDef):
        return 0
    decorators = {d.id if isinstance(d, ast.Name) else getattr(d, "attr", "") for d in getattr(fn, "decorator_list", [])}
    return 0 if "staticmethod" in decorators else 1


def _class_fields(cls: ast.ClassDef) -> list[str]:
    return [s.target.id for s in cls.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]


def _element_path(value: ast.expr, path: tuple[int, ...]) -> ast.expr:
    for index in path:  # ``l, r = block_shape``: the element of what was unpacked
        value = _element(value, index)
    return value


def _element(value: ast.expr, index: int) -> ast.expr:
    """``value[index]`` as a node placed where ``value`` is written (for unpacking ``l, r = shape``)."""
    if isinstance(value, (ast.Tuple, ast.List)) and -len(value.elts) <= index < len(value.elts):
        return value.elts[index]
    element = ast.copy_location(ast.Subscript(value=value, slice=ast.copy_location(ast.Constant(index), value)), value)
    element.end_lineno, element.end_col_offset = value.end_lineno, value.end_col_offset
    element._pallasite_parent = parent_of(value)  # type: ignore[attr-defined]
    return element


def _bound_in(scope: ast.AST, name: str):
    """(value, unpack path, conditional) of the one assignment to ``name`` directly in ``scope``
    (conditional: it sits under an ``if``/``try``); _MANY if several, or a loop or augmented
    assignment rebinds it."""
    found = []
    body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
    for stmt, nested in _statements(body):
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
                found.append((value, path, nested))
    if len(found) > 1:
        return _MANY
    return found[0] if found else None


def _bound_alternatives(scope: ast.AST, name: str):
    """The assignments to ``name`` directly in ``scope`` that may hold its value where it is used:
    the one assignment (``_bound_in``); or one unconditional assignment and the assignments under an
    ``if``/``try`` after it that may replace it (``n = num_queries_per_block`` then ``if n is None:
    n = tuned(...)``); [] when none, _MANY when unknown (several unconditional ones, loops)."""
    one = _bound_in(scope, name)
    if one is not _MANY:
        return [one] if one is not None else []
    found = []
    body = scope.body if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
    for stmt, nested in _statements(body):
        if isinstance(stmt, (ast.AugAssign, ast.For, ast.With)) and name in _names_in(stmt):
            return _MANY
        targets = [(t, stmt.value) for t in stmt.targets] if isinstance(stmt, ast.Assign) else \
            [(stmt.target, stmt.value)] if isinstance(stmt, ast.AnnAssign) and stmt.value is not None else []
        for target, value in targets:
            path = _path_to(target, name)
            if path is not None:
                found.append((value, path, nested, stmt.lineno))
    plain = [f for f in found if not f[2]]
    if len(plain) != 1 or len(found) > 4 or any(f[3] < plain[0][3] for f in found if f[2]):
        return _MANY
    return [f[:3] for f in found]


def _statements(body: list[ast.stmt], nested: bool = False):
    """(statement, under an if/try) for a body's statements, those in if/try blocks included (not
    those of nested functions)."""
    for stmt in body:
        yield stmt, nested
        if isinstance(stmt, (ast.If, ast.Try)):
            for block in (stmt.body, stmt.orelse, getattr(stmt, "finalbody", []), *[h.body for h in getattr(stmt, "handlers", [])]):
                yield from _statements(block, True)


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

"""Numbers that carry where they were written, for the locating run of a failed check (worker side:
stdlib only).

Tiers 1-3 run the user's file as written. When an entry failed, ``runner/carried_pass.py`` loads the
file once more, and ``rewrite_literals`` turns each int and float literal written there into
``OInt``/``OFloat``: an ``int``/``float`` subclass holding the
places (file, 1-based line, 0-based column, end column) of the literal(s) that made it. Python's
arithmetic on them (``+ - * / // % **``, unary ``- + abs``, ``min``/``max`` through the module's
own names) returns carried values with the union of the operands' places, so a block size that
travels through a dict entry, a dataclass field, an attribute, a function argument or default,
``functools.partial``, a ``jit`` static argument or ``**options`` still says where it was written
when it reaches a ``BlockSpec`` — the running program carries it, nothing has to foresee the path.
Comparisons answer plain ``bool``; ``operator.index``/``int()`` answer plain ``int`` (that is
where jax drops the places: ``value_origins`` reads them from a ``pallas_call``'s arguments before
jax normalises them).

Hashing, equality, ``repr``/``str``, ``json`` and pickling (``__reduce__`` gives the plain number)
are int's and float's, and jax treats the subclasses as the weakly typed Python scalars they are;
but ``type(x) is int`` is False and small ints lose their identity, so a program that asks may take
another branch: that is why only the locating run carries them, and why its places are believed
only where it did what the checked run did (``runner/carried_pass.py``).
"""

from __future__ import annotations

import ast
import builtins
from typing import Any, Iterable

Place = tuple[str, int, int, int]  # file, 1-based line, 0-based column, end column
CONSTANTS = "__pallasite_k__"  # the module global holding the file's carried literals
MAX_PLACES = 8  # a value made from more literals keeps the first ones (bounded cost per operation)


def _union(a: frozenset[Place], b: Any) -> frozenset[Place]:
    other = getattr(b, "_places", None)
    if not other:
        return a
    both = a | other
    return both if len(both) <= MAX_PLACES else frozenset(sorted(both)[:MAX_PLACES])


class OInt(int):
    """An int that remembers the literal(s) it was made from (``places``)."""

    def __new__(cls, value: int = 0, places: frozenset[Place] = frozenset()) -> "OInt":  # type(x)(v) works
        self = int.__new__(cls, value)
        self._places = places
        return self

    @property
    def places(self) -> frozenset[Place]:
        return self._places

    __hash__ = int.__hash__

    def __reduce__(self) -> Any:
        return (int, (int(self),))

    def __copy__(self) -> "OInt":
        return self

    def __deepcopy__(self, memo: Any) -> "OInt":
        return self


class OFloat(float):
    """A float that remembers the literal(s) it was made from (``places``)."""

    def __new__(cls, value: float = 0, places: frozenset[Place] = frozenset()) -> "OFloat":  # type(x)(v) works
        self = float.__new__(cls, value)
        self._places = places
        return self

    @property
    def places(self) -> frozenset[Place]:
        return self._places

    __hash__ = float.__hash__

    def __reduce__(self) -> Any:
        return (float, (float(self),))

    def __copy__(self) -> "OFloat":
        return self

    def __deepcopy__(self, memo: Any) -> "OFloat":
        return self


def _carry(result: Any, places: frozenset[Place]) -> Any:
    kind = type(result)
    if kind is int:
        return OInt(result, places)
    if kind is float:
        return OFloat(result, places)
    return result


def _binary(base: type, name: str) -> Any:
    plain = getattr(base, name)

    def method(self: Any, other: Any, *rest: Any) -> Any:
        result = plain(self, other, *rest)
        if result is NotImplemented or type(result) not in (int, float):
            return result
        return _carry(result, _union(self._places, other))

    method.__name__ = name
    return method


def _unary(base: type, name: str) -> Any:
    plain = getattr(base, name)

    def method(self: Any) -> Any:
        return _carry(plain(self), self._places)

    method.__name__ = name
    return method


_BINARY = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
           "__truediv__", "__rtruediv__", "__mod__", "__rmod__", "__pow__", "__rpow__")
_INT_BINARY = ("__lshift__", "__rlshift__", "__rshift__", "__rrshift__", "__and__", "__rand__", "__or__", "__ror__",
               "__xor__", "__rxor__")
for _name in _BINARY + _INT_BINARY:
    setattr(OInt, _name, _binary(int, _name))
for _name in _BINARY:
    setattr(OFloat, _name, _binary(float, _name))
for _name in ("__neg__", "__pos__", "__abs__", "__invert__"):
    setattr(OInt, _name, _unary(int, _name))
for _name in ("__neg__", "__pos__", "__abs__"):
    setattr(OFloat, _name, _unary(float, _name))
del _name


def places_of(value: Any) -> frozenset[Place]:
    """The places a value carries (empty for anything not made from the user's literals)."""
    places = getattr(value, "_places", None) if isinstance(value, (OInt, OFloat)) else None
    return places or frozenset()


def _extreme(pick: Any) -> Any:
    def choose(*args: Any, **kwargs: Any) -> Any:
        result = pick(*args, **kwargs)
        if not isinstance(result, (OInt, OFloat)) or kwargs.get("key") is not None:
            return result
        pool: Iterable[Any] = args if len(args) > 1 else ()
        places = result._places
        for arg in pool:
            places = _union(places, arg)
        return _carry(int(result) if isinstance(result, int) else float(result), places)

    choose.__name__ = pick.__name__
    choose.__doc__ = pick.__doc__
    return choose


# ``min(a, b)`` of two carried values carries both (the one not chosen shaped the choice too)
carried_min = _extreme(builtins.min)
carried_max = _extreme(builtins.max)


# --------------------------------------------------------------------------- the rewrite


class _Literals(ast.NodeTransformer):
    """Replaces int/float literals by ``__pallasite_k__[n]`` (their carried values)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.values: list[Any] = []
        self.extremes: list[tuple[ast.Name, str]] = []  # min/max loads made carrying, with their names
        self.rebound = False  # the file binds min or max itself: those loads are put back

    def visit_Name(self, node: ast.Name) -> Any:
        if node.id in EXTREMES:
            if isinstance(node.ctx, ast.Load):
                self.extremes.append((node, node.id))
                node.id = EXTREMES[node.id]
            else:
                self.rebound = True
        return node

    def _binding(self, *names: str | None) -> None:
        if any(n is not None and n.split(".")[0] in EXTREMES for n in names):
            self.rebound = True

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        self._binding(node.name)
        return self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> Any:
        self._binding(*(a.asname or a.name for a in node.names))
        return node

    def visit_Global(self, node: ast.Global) -> Any:
        self._binding(*node.names)
        return node

    visit_Nonlocal = visit_Global

    def finish(self) -> None:
        if self.rebound:
            for node, name in self.extremes:
                node.id = name

    def visit_Constant(self, node: ast.Constant) -> Any:
        value = node.value
        if type(value) not in (int, float):
            return node
        end = node.end_col_offset if node.end_lineno == node.lineno and node.end_col_offset is not None else node.col_offset + 1
        place = frozenset({(self.path, node.lineno, node.col_offset, end)})
        self.values.append(OInt(value, place) if type(value) is int else OFloat(value, place))
        load = ast.Subscript(value=ast.Name(id=CONSTANTS, ctx=ast.Load()),
                             slice=ast.Constant(len(self.values) - 1), ctx=ast.Load())
        return ast.copy_location(load, node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> Any:
        return node  # f-strings: their format specs must stay literal

    def visit_match_case(self, node: ast.match_case) -> Any:
        node.guard = self.visit(node.guard) if node.guard is not None else None
        node.body = [self.visit(n) for n in node.body]
        return node  # patterns must stay literal

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        self._binding(*(a.asname or a.name for a in node.names))
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        if node.value is not None:
            node.value = self.visit(node.value)
        return node  # annotations stay as written

    def visit_arg(self, node: ast.arg) -> Any:
        self._binding(node.arg)
        return node

    def visit_FunctionDef(self, node: Any) -> Any:
        self._binding(node.name)
        node.args = self.visit(node.args)
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.body = [self.visit(n) for n in node.body]
        return node  # the return annotation stays as written

    visit_AsyncFunctionDef = visit_FunctionDef


EXTREMES = {"min": "__pallasite_min__", "max": "__pallasite_max__"}


def rewrite_literals(tree: ast.Module, path: str) -> list[Any]:
    """Rewrite ``tree`` (of the file at ``path``) in place so its int and float literals are read from
    ``__pallasite_k__`` (and, when the file does not rebind them, ``min``/``max`` are the carrying
    ones); returns that list, to be bound in the module's globals before it runs. Bools, strings,
    literals in f-strings, ``match`` patterns and annotations stay as written."""
    literals = _Literals(path)
    literals.visit(tree)
    literals.finish()
    ast.fix_missing_locations(tree)
    return literals.values


def carried_globals(values: list[Any]) -> dict[str, Any]:
    """What the rewritten module needs in its globals: the literals and the carrying min/max (under
    names no ``import *`` copies and no task discovery reads)."""
    return {CONSTANTS: values, EXTREMES["min"]: carried_min, EXTREMES["max"]: carried_max}


_COMPILED: dict[tuple[str, str | bytes, int], tuple[Any, list[Any]]] = {}  # the last files compiled carried
_KEEP = 4


def compile_carried(source: str | bytes, path: str, namespace: dict[str, Any], flags: int = 0) -> Any:
    """``compile(source, path, "exec")`` with the literals carried, the values bound in ``namespace``
    (the last few files' code and values are kept: a file checked again unchanged is not rewritten
    again; the carried values are immutable, so sharing them between runs changes nothing)."""
    key = (path, source, flags)
    if key not in _COMPILED:
        tree = compile(source, path, "exec", flags=ast.PyCF_ONLY_AST | flags, dont_inherit=True)
        values = rewrite_literals(tree, path)
        while len(_COMPILED) >= _KEEP:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[key] = (compile(tree, path, "exec", flags=flags, dont_inherit=True), values)
    code, values = _COMPILED[key]
    _bind(namespace, values)
    return code


def _bind(namespace: dict[str, Any], values: list[Any]) -> None:
    namespace.update(carried_globals(values))


def rewrite_statements(source: str | bytes, path: str, namespace: dict[str, Any]) -> ast.Module:
    """The file's tree with its literals carried (for a statement-by-statement load), values bound."""
    tree = compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    _bind(namespace, rewrite_literals(tree, path))
    return tree


# --------------------------------------------------------------------------- reading them back


def value_origins(kwargs: dict[str, Any], out_shape: Any, path: str,
                  made_at: Any = None) -> dict[str, list[list[int]]]:
    """Where the numbers of one ``pallas_call``'s arguments were written in ``path``: ``{"in_specs[1][0]":
    [[line, col, end_col], ...], "grid[0]": ..., "out_shape[0][1]": ..., "scratch_shapes[0][0]": ...,
    "vmem_limit_bytes": ...}`` (only the numbers made from literals of that file). ``made_at(struct)``:
    where the ``ShapeDtypeStruct`` expression that made an out_shape entry is, ``(file, line, col,
    end_line, end_col)``, given as ``"out_shape[i].made": [[line, col, end_line, end_col]]``."""
    out: dict[str, list[list[int]]] = {}

    def note(key: str, value: Any) -> None:
        here = sorted([line, col, end] for file, line, col, end in places_of(value) if file == path)
        if here:
            out[key] = here

    grid_spec = kwargs.get("grid_spec")

    def arg(name: str) -> Any:
        return kwargs.get(name) if grid_spec is None else getattr(grid_spec, name, None)

    grid = arg("grid")
    if isinstance(grid, (tuple, list)):
        for i, d in enumerate(grid):
            note(f"grid[{i}]", d)
    elif grid is not None:
        note("grid[0]", grid)
    for role in ("in_specs", "out_specs"):
        specs = arg(role)
        specs = specs if isinstance(specs, (list, tuple)) else ([specs] if specs is not None else [])
        for i, spec in enumerate(specs):
            shape = getattr(spec, "block_shape", None)
            for d, dim in enumerate(shape if isinstance(shape, (tuple, list)) else ()):
                note(f"{role}[{i}][{d}]", getattr(dim, "block_size", dim))
    for i, buf in enumerate(arg("scratch_shapes") or ()):
        written = getattr(buf, "_pallasite_written_shape", None) or getattr(buf, "shape", None) or ()
        for d, dim in enumerate(written):
            note(f"scratch_shapes[{i}][{d}]", dim)
    shapes = out_shape if isinstance(out_shape, (list, tuple)) else [out_shape]
    for i, struct in enumerate(shapes):
        for d, dim in enumerate(getattr(struct, "shape", None) or ()):
            note(f"out_shape[{i}][{d}]", dim)
        made = made_at(struct) if made_at is not None else None
        if made is not None and made[0] == path:
            out[f"out_shape[{i}].made"] = [list(made[1:])]
    params = kwargs.get("compiler_params")
    note("vmem_limit_bytes", getattr(params, "vmem_limit_bytes", None))
    return out


__all__ = ["CONSTANTS", "OFloat", "OInt", "Place", "carried_globals", "carried_max", "carried_min",
           "compile_carried", "places_of", "rewrite_literals", "rewrite_statements", "value_origins"]

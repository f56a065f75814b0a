"""Tier-0 rules on kernels and sharded arrays, read with Python's ``ast`` before anything runs:

- PLS116 a ``pallas_call`` run inside ``jax.shard_map`` with its varying-axes check on (``check_vma``,
  ``True`` unless passed ``False``; the old ``jax.experimental.shard_map`` spells it ``check_rep``)
  whose ``out_shape`` is a ``jax.ShapeDtypeStruct`` without ``manual_axis_type=`` (``vma=`` in jax
  before 0.10): jax raises "When `check_vma=True` on `jax.shard_map`, `manual_axis_type` on
  `jax.ShapeDtypeStruct` must not be `None`" while tracing. Said at the struct, with a fix that
  passes the first operand's (``manual_axis_type=jax.typeof(x).manual_axis_type``). The function
  given to shard_map (a ``def`` of the file, or the one it decorates) is read, and the functions
  of the file it calls by name, one level down.
- PLS115 a function of the file that makes a ``pallas_call`` applied, outside ``shard_map``, to an
  array placed with a sharding over a mesh axis in the same function or module body
  (``y = jax.device_put(x, NamedSharding(mesh, P("x", None)))``, ``jax.reshard``,
  ``jax.lax.with_sharding_constraint``; the sharding written there or bound to a name once): on a
  TPU the partitioner cannot split a Mosaic kernel ("Mosaic kernels cannot be automatically
  partitioned. Please wrap the call in a shard_map"). Said at the call, with the shard_map to write.

Silent whenever a piece does not resolve (a sharding passed in, a function not of this file).

Cost per edit (tier 0 runs after each one): both rules stop at once on a text that names neither
``shard_map`` nor ``NamedSharding``, and then on a file whose calls include no ``pallas_call`` or
none of their class (``_UnitFacts``: each top-level unit's callee names and shard_map sites, read once
per unit text and kept with the unit, ``Unit.facts``). Past that, each function's calls, assignments
and placed names are read once per text of the function and kept on its def node (``_DefFacts``),
so an edit elsewhere reads only the edited unit again.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from ..ast_units import Unit, index_of, walk
from ..types import Finding, Span
from .context import RuleContext, finding, python_tree, replace

PLACEMENTS = ("device_put", "reshard", "with_sharding_constraint")


def vma_out_shape(ctx: RuleContext) -> Iterator[Finding]:
    if "shard_map" not in ctx.source.text:
        return
    tree = python_tree(ctx.source)
    if tree is None:
        return
    units = _units(tree)
    if not any("pallas_call" in u.callees for u in units) or not any(u.shard_maps for u in units):
        return
    defs = _defs(tree)
    seen: set[int] = set()
    for fn in _shard_mapped(units, defs):
        for call in _pallas_calls(fn, defs):
            for struct, operand in _plain_structs(call, fn):
                if id(struct) in seen:
                    continue
                seen.add(id(struct))
                yield _vma_finding(struct, operand, fn.name, ctx.source.text.splitlines())


def _vma_finding(struct: ast.Call, operand: str | None, fn: str, lines: list[str]) -> Finding:
    key = vma_keyword()
    value = f"jax.typeof({operand}).{key}" if operand else None
    message = (f"this out_shape's jax.ShapeDtypeStruct has no {key}, and the pallas_call runs inside shard_map "
               f"(through {fn}) with check_vma on: jax refuses it while tracing (\"`{key}` on "
               "`jax.ShapeDtypeStruct` must not be `None`\"). Say how the output varies across the mesh axes: "
               f"{key}={value or 'jax.typeof(x).' + key} for an output sharded like operand x, or pass "
               "check_vma=False to shard_map.")
    span = _span(struct)
    fix = None
    last = (struct.args + [k.value for k in struct.keywords])[-1:] or [None]
    if value is not None and last[0] is not None and struct.end_lineno == last[0].end_lineno:
        # after the last argument (a trailing comma already there is kept)
        at = Span(struct.end_lineno - 1, last[0].end_col_offset, struct.end_lineno - 1, last[0].end_col_offset)
        fix = replace(f"Pass {key}={value}", at, f", {key}={value}")
    return finding("PLS116", message, span, fix=fix)


def unpartitioned_call(ctx: RuleContext) -> Iterator[Finding]:
    if "NamedSharding" not in ctx.source.text:
        return
    tree = python_tree(ctx.source)
    if tree is None:
        return
    units = _units(tree)
    callees = frozenset().union(*(u.callees for u in units))
    if "pallas_call" not in callees or "NamedSharding" not in callees or callees.isdisjoint(PLACEMENTS):
        return
    defs = _defs(tree)
    kernels = {name for name, fn in defs.items() if _facts(fn).pallas}
    inside = {id(fn) for fn in _shard_mapped(units, defs, vma_only=False)}
    scopes = [(_module_calls(units), _module_placed(units))]
    scopes += [(_facts(fn).own_calls, _facts(fn).placed()) for fn in defs.values() if id(fn) not in inside]
    for own_calls, placed in scopes:
        for call in own_calls:
            name = _callee(call)
            if name not in kernels:
                continue
            for arg in call.args:
                if isinstance(arg, ast.Name) and arg.id in placed:
                    axes, spec = placed[arg.id]
                    message = (f"{name}({arg.id}) applies a pallas_call to {arg.id}, placed sharded over mesh axis "
                               f"{', '.join(repr(a) for a in axes)}, outside shard_map: on a TPU the partitioner cannot "
                               "split a Mosaic kernel (\"Mosaic kernels cannot be automatically partitioned. Please "
                               f"wrap the call in a shard_map\"). Run it per shard: jax.shard_map({name}, mesh=mesh, "
                               f"in_specs={spec}, out_specs={spec})({arg.id}).")
                    yield finding("PLS115", message, _span(call))
                    break


# --------------------------------------------------------------------------- what is kept per unit and per def


@dataclass
class _UnitFacts:
    """One unit's callee names and its shard_map sites ((depth, node) in ``ast.walk`` order: calls of
    ``shard_map`` and functions a shard_map decorates), read once per unit text."""

    stmts: list[ast.stmt]  # the unit's statements
    callees: frozenset[str]
    shard_maps: list[tuple[int, ast.AST]]
    _module: tuple[list[ast.Call], list[ast.Assign]] | None = None

    def module_level(self) -> tuple[list[ast.Call], list[ast.Assign]]:
        """The calls and assignments of the unit's module-level statements (not in a def or class)."""
        if self._module is None:
            own = _own_statements(self.stmts)
            self._module = (_own_calls(self.stmts), [n for n in own if isinstance(n, ast.Assign)])
        return self._module


_UNIT_KEY = "sharding"


def _units(tree: ast.Module) -> list[_UnitFacts]:
    out = []
    for unit in index_of(tree).units:
        facts = unit.facts.get(_UNIT_KEY)
        if facts is None:
            facts = unit.facts[_UNIT_KEY] = _read_unit(unit)
        out.append(facts)
    return out


def _read_unit(unit: Unit) -> _UnitFacts:
    callees = frozenset(_callee(call) for _, call in unit.calls)
    shard_maps: list[tuple[int, ast.AST]] = []
    if "shard_map" in callees or any(_is_shard_map_decorator(call) for _, call in unit.calls):
        shard_maps = [(depth, node) for depth, node in unit.positioned
                      if isinstance(node, ast.Call) and _callee(node) == "shard_map"
                      or isinstance(node, ast.FunctionDef) and any(isinstance(dec, ast.Call) and _is_shard_map_decorator(dec)
                                                                   for dec in node.decorator_list)]
    return _UnitFacts(unit.stmts, callees, shard_maps)


def _module_calls(units: list[_UnitFacts]) -> list[ast.Call]:
    """The module's own calls, in the order one reading of the whole body gives them (last statement first)."""
    return [call for u in reversed(units) for call in u.module_level()[0]]


def _module_placed(units: list[_UnitFacts]) -> dict[str, tuple[list[str], str]]:
    return _placed_names([a for u in reversed(units) for a in u.module_level()[1]])


_DEF_KEY = "_pallasite_sharding"  # a def's _DefFacts (ast_links.discard drops it with the def's other memos)


@dataclass
class _DefFacts:
    """What the rules read of one function, kept on its def node (reused while its text is unchanged):
    the calls under it and its assignments (``ast.walk`` order), its ``pallas_call`` calls, the calls
    of its own statements, and (when first asked) the names it places sharded."""

    calls: list[ast.Call]
    assigns: list[ast.Assign]
    pallas: list[ast.Call]
    own_calls: list[ast.Call]
    own_assigns: list[ast.Assign]
    _placed: dict[str, tuple[list[str], str]] | None = None

    def placed(self) -> dict[str, tuple[list[str], str]]:
        if self._placed is None:
            self._placed = _placed_names(self.own_assigns)
        return self._placed


def _facts(fn: ast.FunctionDef) -> _DefFacts:
    kept = fn.__dict__.get(_DEF_KEY)
    if kept is None:
        nodes = walk(fn)
        calls = [n for n in nodes if isinstance(n, ast.Call)]
        kept = _DefFacts(calls=calls, assigns=[n for n in nodes if isinstance(n, ast.Assign)],
                         pallas=[n for n in calls if _callee(n) == "pallas_call"],
                         own_calls=_own_calls(list(ast.iter_child_nodes(fn))),
                         own_assigns=[n for n in _own_statements(fn.body) if isinstance(n, ast.Assign)])
        setattr(fn, _DEF_KEY, kept)
    return kept


# --------------------------------------------------------------------------- reading the file


def _defs(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in index_of(tree).defs if isinstance(n, ast.FunctionDef)}


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _span(node: ast.AST) -> Span:
    return Span(node.lineno - 1, node.col_offset, (node.end_lineno or node.lineno) - 1, node.end_col_offset or 0)


def _checks_vma(call: ast.Call) -> bool:
    for k in call.keywords:
        if k.arg in ("check_vma", "check_rep"):
            return not (isinstance(k.value, ast.Constant) and k.value.value is False)
        if k.arg is None:
            return False  # **options: not known
    return True


def _shard_mapped(units: list[_UnitFacts], defs: dict[str, ast.FunctionDef], *,
                  vma_only: bool = True) -> list[ast.FunctionDef]:
    """The functions of the file run inside a shard_map that checks varying axes (any shard_map when
    ``vma_only`` is False), in the order a walk of the whole file meets them (units' sites by depth)."""
    sites = sorted((pair for u in units for pair in u.shard_maps), key=lambda pair: pair[0])
    out: list[ast.FunctionDef] = []
    for _, node in sites:
        if isinstance(node, ast.Call) and _callee(node) == "shard_map" and (_checks_vma(node) or not vma_only):
            target = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "f"), None)
            if isinstance(target, ast.Name) and target.id in defs:
                out.append(defs[target.id])
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and _is_shard_map_decorator(dec) and (_checks_vma(dec) or not vma_only):
                    out.append(node)
    return out


def _is_shard_map_decorator(dec: ast.Call) -> bool:
    if _callee(dec) == "shard_map" and not dec.args:
        return True  # @jax.shard_map(mesh=..., in_specs=..., out_specs=...)
    return _callee(dec) == "partial" and bool(dec.args) and (
        isinstance(dec.args[0], (ast.Attribute, ast.Name)) and (getattr(dec.args[0], "attr", None) or
                                                                 getattr(dec.args[0], "id", None)) == "shard_map")


def _pallas_calls(fn: ast.FunctionDef, defs: dict[str, ast.FunctionDef]) -> list[tuple[ast.Call, ast.FunctionDef]]:
    """``pallas_call(...)`` calls in ``fn`` and in the functions of the file it calls by name (one level)."""
    out = [(n, fn) for n in _facts(fn).pallas]
    for n in _facts(fn).calls:
        if _callee(n) in defs and defs[_callee(n)] is not fn:
            callee = defs[_callee(n)]
            out += [(m, callee) for m in _facts(callee).pallas]
    return out


def _plain_structs(item: tuple[ast.Call, ast.FunctionDef], fn: ast.FunctionDef) -> list[tuple[ast.Call, str | None]]:
    """The ``jax.ShapeDtypeStruct(...)`` of the call's ``out_shape`` (written there or bound once in its
    function) that give no varying axes, each with the name of the call's first operand."""
    call, owner = item
    value = next((k.value for k in call.keywords if k.arg == "out_shape"), None)
    if isinstance(value, ast.Name):
        bound = [n.value for n in _facts(owner).assigns if len(n.targets) == 1
                 and isinstance(n.targets[0], ast.Name) and n.targets[0].id == value.id]
        value = bound[0] if len(bound) == 1 else None
    if value is None:
        return []
    structs = [value] if isinstance(value, ast.Call) else list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else []
    operand = _first_operand(call, owner)
    return [(s, operand) for s in structs if isinstance(s, ast.Call) and _callee(s) == "ShapeDtypeStruct"
            and not any(k.arg in ("manual_axis_type", "vma", None) for k in s.keywords)]


def _first_operand(call: ast.Call, owner: ast.FunctionDef) -> str | None:
    """The name the pallas_call is applied to first: ``pl.pallas_call(...)(x)``."""
    for node in _facts(owner).calls:
        if node.func is call and node.args and isinstance(node.args[0], ast.Name):
            return node.args[0].id
    return None


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _own(nodes: list[ast.AST], kind: type, inside: type = ast.AST) -> list:
    """The ``kind`` nodes among ``nodes`` (a scope's children) and under them through ``inside`` nodes, not in the
    functions, classes or lambdas defined there."""
    out: list = []
    todo = list(nodes)
    while todo:
        node = todo.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, kind):
            out.append(node)
        todo.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, inside))
    return out


def _own_calls(nodes: list[ast.AST]) -> list[ast.Call]:
    """Calls in ``nodes`` (a scope's children) and under them, not in functions defined there."""
    return _own(nodes, ast.Call)


def _placed_names(assigns: list[ast.Assign]) -> dict[str, tuple[list[str], str]]:
    """Names a scope's own ``assigns`` bind to an array placed with a sharding over mesh axes:
    {name: (axes, spec text)}."""
    shardings: dict[str, ast.Call] = {}
    placed: dict[str, tuple[list[str], str]] = {}
    for node in sorted(assigns, key=lambda n: n.lineno):
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        name, value = node.targets[0].id, node.value
        if isinstance(value, ast.Call) and _callee(value) == "NamedSharding":
            shardings[name] = value
        elif isinstance(value, ast.Call) and _callee(value) in PLACEMENTS and len(value.args) >= 2:
            sharding = value.args[1]
            if isinstance(sharding, ast.Name):
                sharding = shardings.get(sharding.id)
            axes = _split_axes(sharding)
            if axes:
                placed[name] = axes
    return placed


def _own_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    return _own(body, ast.stmt, inside=ast.stmt)


def _split_axes(sharding: ast.AST | None) -> tuple[list[str], str] | None:
    """The mesh axes ``NamedSharding(mesh, P(...))`` splits the array over, and the spec's text."""
    if not (isinstance(sharding, ast.Call) and _callee(sharding) == "NamedSharding" and len(sharding.args) >= 2):
        return None
    spec = sharding.args[1]
    if not (isinstance(spec, ast.Call) and _callee(spec) in ("P", "PartitionSpec")):
        return None
    axes = [e.value for e in ast.walk(spec) if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return (axes, ast.unparse(spec)) if axes else None


@lru_cache(maxsize=1)
def vma_keyword() -> str:
    """``manual_axis_type`` when the installed jax's ShapeDtypeStruct takes it (0.10 on), else ``vma``;
    read from jax's source, never imported."""
    from .apis import jax_root

    root = jax_root()
    try:
        with open(os.path.join(root or "", "_src", "core.py"), encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return "manual_axis_type"
    struct = text[text.find("class ShapeDtypeStruct"):][:4000]
    return "manual_axis_type" if "manual_axis_type" in struct else "vma"


RULES = (vma_out_shape, unpartitioned_call)

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
"""

from __future__ import annotations

import ast
import os
from functools import lru_cache
from typing import Iterator

from ..types import Finding, Span
from .context import RuleContext, finding, python_tree, replace

PLACEMENTS = ("device_put", "reshard", "with_sharding_constraint")


def vma_out_shape(ctx: RuleContext) -> Iterator[Finding]:
    tree = python_tree(ctx.source)
    if tree is None:
        return
    defs = _defs(tree)
    seen: set[int] = set()
    for fn in _shard_mapped(tree, defs):
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
    tree = python_tree(ctx.source)
    if tree is None:
        return
    defs = _defs(tree)
    kernels = {name for name, fn in defs.items() if _pallas_calls(fn, {})}
    inside = {id(fn) for fn in _shard_mapped(tree, defs, vma_only=False)}
    for scope in [tree, *defs.values()]:
        if id(scope) in inside:
            continue
        placed = _placed_names(scope)
        for call in _own_calls(scope):
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


# --------------------------------------------------------------------------- reading the file


def _defs(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


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


def _shard_mapped(tree: ast.Module, defs: dict[str, ast.FunctionDef], *, vma_only: bool = True) -> list[ast.FunctionDef]:
    """The functions of the file run inside a shard_map that checks varying axes (any shard_map when
    ``vma_only`` is False)."""
    out: list[ast.FunctionDef] = []
    for node in ast.walk(tree):
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
    out = [(n, fn) for n in ast.walk(fn) if isinstance(n, ast.Call) and _callee(n) == "pallas_call"]
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and _callee(n) in defs and defs[_callee(n)] is not fn:
            callee = defs[_callee(n)]
            out += [(m, callee) for m in ast.walk(callee) if isinstance(m, ast.Call) and _callee(m) == "pallas_call"]
    return out


def _plain_structs(item: tuple[ast.Call, ast.FunctionDef], fn: ast.FunctionDef) -> list[tuple[ast.Call, str | None]]:
    """The ``jax.ShapeDtypeStruct(...)`` of the call's ``out_shape`` (written there or bound once in its
    function) that give no varying axes, each with the name of the call's first operand."""
    call, owner = item
    value = next((k.value for k in call.keywords if k.arg == "out_shape"), None)
    if isinstance(value, ast.Name):
        bound = [n.value for n in ast.walk(owner) if isinstance(n, ast.Assign) and len(n.targets) == 1
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
    for node in ast.walk(owner):
        if isinstance(node, ast.Call) and node.func is call and node.args and isinstance(node.args[0], ast.Name):
            return node.args[0].id
    return None


def _own_calls(scope: ast.AST) -> list[ast.Call]:
    """Calls in ``scope``'s own statements (not in functions defined inside it)."""
    out: list[ast.Call] = []
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Call):
            out.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _placed_names(scope: ast.AST) -> dict[str, tuple[list[str], str]]:
    """Names ``scope`` binds to an array placed with a sharding over mesh axes: {name: (axes, spec text)}."""
    shardings: dict[str, ast.Call] = {}
    placed: dict[str, tuple[list[str], str]] = {}
    for node in sorted((n for n in _own_statements(scope) if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
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


def _own_statements(scope: ast.AST) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    todo = list(getattr(scope, "body", []))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        out.append(node)
        todo.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt))
    return out


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
    from ..apis import jax_root

    root = jax_root()
    try:
        with open(os.path.join(root or "", "_src", "core.py"), encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return "manual_axis_type"
    struct = text[text.find("class ShapeDtypeStruct"):][:4000]
    return "manual_axis_type" if "manual_axis_type" in struct else "vma"


RULES = (vma_out_shape, unpartitioned_call)

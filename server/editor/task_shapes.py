"""Grid sizes at the task's example input shapes, read from the source (never executed).

A grid such as ``(x.shape[0] // BLOCK_ROWS, pl.cdiv(x.shape[1], bn))`` is not static in the
source, but the file's task states the shapes (``example_inputs()`` returning
``jax.ShapeDtypeStruct((4096, 512), jnp.float32)`` values). This module reads those literal
shapes, binds them to the entry's positional parameters, and evaluates grid expressions made of
ints, module int constants, the entry's int defaults, ``name.shape[i]``, ``+ - * // %`` and
``pl.cdiv``. Anything else gives None: the hover then says the step count is not static.
"""

from __future__ import annotations

import ast
from typing import Any, Sequence

Shapes = dict[str, tuple[int, ...]]


def _shape_literal(node: ast.AST) -> tuple[int, ...] | None:
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts):
        return tuple(e.value for e in node.elts)
    return None


def _struct_shape(node: ast.AST, names: Shapes) -> tuple[int, ...] | None:
    """The shape of ``jax.ShapeDtypeStruct((...), dtype)`` or of a name bound to one."""
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if callee == "ShapeDtypeStruct":
            shape = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "shape"), None)
            return _shape_literal(shape) if shape is not None else None
    return None


def _inputs_shapes(fn: ast.FunctionDef) -> list[tuple[int, ...] | None] | None:
    names: Shapes = {}
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            shape = _struct_shape(stmt.value, names)
            if shape is not None:
                names[stmt.targets[0].id] = shape
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            values = stmt.value.elts if isinstance(stmt.value, (ast.Tuple, ast.List)) else [stmt.value]
            return [_struct_shape(v, names) for v in values]
    return None


def entry_shapes(tree: ast.Module, entry: str, inputs: str) -> tuple[Shapes, dict[str, int]]:
    """Entry parameter -> example shape, and the entry's int keyword defaults (the tunables)."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    fn, make = functions.get(entry), functions.get(inputs)
    if fn is None or make is None:
        return {}, {}
    shapes = _inputs_shapes(make) or []
    params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
    bound = {name: shape for name, shape in zip(params, shapes) if shape is not None}
    defaults = {a.arg: d.value for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)
                if isinstance(d, ast.Constant) and type(d.value) is int}
    positional_defaults = fn.args.defaults
    for a, d in zip(fn.args.args[len(fn.args.args) - len(positional_defaults):], positional_defaults):
        if isinstance(d, ast.Constant) and type(d.value) is int:
            defaults[a.arg] = d.value
    return bound, defaults


def module_ints(tree: ast.Module) -> dict[str, int]:
    out: dict[str, int] = {}
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int):
            out[stmt.targets[0].id] = stmt.value.value
    return out


def evaluate(expr: str, shapes: Shapes, ints: dict[str, int]) -> int | None:
    """The int value of a grid dim's source text, or None if it needs more than this module reads."""
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return None
    try:
        value = _eval(node, shapes, ints)
    except (KeyError, IndexError, ZeroDivisionError, TypeError, ValueError):
        return None
    return value if isinstance(value, int) else None


def _eval(node: ast.AST, shapes: Shapes, ints: dict[str, int]) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return ints[node.id]
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        base = node.value.value
        if isinstance(base, ast.Name):
            return shapes[base.id][_eval(node.slice, shapes, ints)]
        raise ValueError("shape of an expression")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, shapes, ints)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, shapes, ints), _eval(node.right, shapes, ints)
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
               ast.FloorDiv: lambda: a // b, ast.Mod: lambda: a % b}
        if type(node.op) in ops:
            return ops[type(node.op)]()
    if isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name == "cdiv":
            a, b = (_eval(arg, shapes, ints) for arg in node.args)
            return -(-a // b)
    raise ValueError(f"unsupported: {ast.dump(node)[:40]}")


def grid_at_inputs(text: str, grid: Sequence[int | str] | None, entry: str | None, inputs: str | None) -> tuple[int, ...] | None:
    """The grid with every dim evaluated at the task's example shapes, or None if one cannot be."""
    if grid is None or entry is None or inputs is None or all(isinstance(g, int) for g in grid):
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    shapes, defaults = entry_shapes(tree, entry, inputs)
    ints = {**module_ints(tree), **defaults}
    dims = [g if isinstance(g, int) else evaluate(g, shapes, ints) for g in grid]
    return None if any(d is None for d in dims) else tuple(dims)  # type: ignore[arg-type]

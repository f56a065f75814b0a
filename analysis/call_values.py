"""Values of one pallas_call followed to where they were written: the dtype of an output.

``out_shape`` is often not written in the call: a list built above it (``out_shapes = [...]``), a
``jax.ShapeDtypeStruct`` bound to a name or returned by a helper of the file (``out_shape=_out(x)``),
an array whose dtype the output copies. ``output_dtype``
follows the call's ``out_shape`` to the ``index``-th output's dtype expression (through names,
lists, tuples and dicts with ``analysis/origins.py``) and then to where that dtype was written:

    origin = output_dtype(text, site.span, 0)   # site: a KernelSite of tier 0
    origin.line, origin.what                    # the line of ``jax.ShapeDtypeStruct(shape, jnp.int32)``

None when the call, its ``out_shape`` or that output cannot be read statically.
"""

from __future__ import annotations

import ast

from . import ast_units
from .origins import Origin, Tracer, functions_around, parse, callee_name
from .types import Span


def output_dtype(text: str, call_span: Span, index: int, field: str | None = None) -> Origin | None:
    """Where the dtype of output ``index`` of the pallas_call at ``call_span`` is written; with ``field``, of the
    output passed as that keyword of a struct of outputs (``Outputs(max_ref=ShapeDtypeStruct(...), ...)``, a
    NamedTuple or dataclass the kernel reads as ``outputs.max_ref``), whatever its index."""
    tree = parse(text)
    if tree is None:
        return None
    call = pallas_call_at(tree, call_span)
    if call is None:
        return None
    out_shape = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "out_shape"), None)
    if out_shape is None:
        return None
    tracer = Tracer(tree, text)
    chain = functions_around(call)
    struct, struct_chain = _field(tracer, out_shape, chain, field) if field else _output(tracer, out_shape, chain, index)
    if struct is None:
        return None
    if isinstance(struct, ast.Call) and callee_name(struct) == "ShapeDtypeStruct":
        dtype = struct.args[1] if len(struct.args) > 1 else next((k.value for k in struct.keywords if k.arg == "dtype"), None)
        if dtype is None:
            return None
        found = tracer.origin(dtype, struct_chain, "argument")
        if found is None or found.kind == "expression":
            return tracer.place(dtype, "argument", None)
        return found
    return tracer.place(struct, "expression", None)  # an array given as out_shape: its dtype is the output's


def _grown_list(name: str, chain: list) -> ast.List | None:
    """``outs = [a, b]`` then only ``outs += [...]`` / ``outs.append(...)`` in the same function: the
    first list (its entries keep their places)."""
    if not chain:
        return None
    first, other = None, False
    for node in ast.walk(chain[-1]):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if first is not None or len(node.targets) != 1 or not isinstance(node.value, ast.List):
                return None
            first = node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            other = other or not isinstance(node.op, ast.Add)
    return None if other else first


def pallas_call_at(tree: ast.Module, span: Span) -> ast.Call | None:
    """The ``pallas_call(...)`` call expression starting at ``span``'s start (the first such call there
    in walk order), found among the expressions starting at that position (``ast_units``: a
    lookup in the unit holding the position, kept with the unit across edits) rather than by
    reading every call of the file (~460 in splash attention, 0.3 ms per analysis)."""
    for node in ast_units.index_of(tree).expressions_at(span.line, span.column):
        if isinstance(node, ast.Call):
            name = callee_name(node)
            if name is not None and name.endswith("pallas_call"):
                return node
    return None


def _field(tracer: Tracer, node: ast.expr, chain: list, field: str, depth: int = 0):
    """The expression passed as keyword ``field`` (or dict key) of the struct an ``out_shape`` value is, and its scope."""
    if isinstance(node, ast.Name) and depth < 8:
        bound = tracer.binding(node.id, chain)
        return _field(tracer, bound.value, bound.chain, field, depth + 1) if bound is not None else (None, chain)
    if isinstance(node, ast.Call):
        return next((k.value for k in node.keywords if k.arg == field), None), chain
    if isinstance(node, ast.Dict):
        return next((v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and k.value == field),
                    None), chain
    return None, chain


def _output(tracer: Tracer, node: ast.expr, chain: list, index: int, depth: int = 0):
    """The expression standing for output ``index`` of an ``out_shape`` value, and its scope."""
    if depth > 8:
        return None, chain
    if isinstance(node, ast.Name):
        bound = tracer.binding(node.id, chain)
        if bound is None:
            prefix = _grown_list(node.id, chain)
            return _output(tracer, prefix, chain, index, depth + 1) if prefix is not None else (None, chain)
        return _output(tracer, bound.value, bound.chain, index, depth + 1)
    if isinstance(node, (ast.List, ast.Tuple)):
        if not (0 <= index < len(node.elts)) or any(isinstance(e, ast.Starred) for e in node.elts):
            return None, chain
        element = node.elts[index]
        if isinstance(element, (ast.Name, ast.Call)):
            return _output(tracer, element, chain, 0, depth + 1)
        return element, chain
    if isinstance(node, ast.Call) and callee_name(node) != "ShapeDtypeStruct":
        returned = tracer.returned(node, chain)  # out_shape=_out(x): a helper of the file with one return
        if returned is not None:
            return _output(tracer, returned[0], returned[1], index, depth + 1)
    if index == 0:
        return node, chain  # one output
    return None, chain

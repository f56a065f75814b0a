"""Static values in a kernel file, read without running it: arrays made by constructors, ints,
literals and the bindings names have where they are used (for ``analysis/inferred_inputs.py``).

``read_array(source, node, use)`` gives the (shape, dtype) an expression makes when it resolves
statically: ``jnp.ones/zeros/empty/full/arange/eye/*_like/asarray``, ``jax.random.*``,
``jax.ShapeDtypeStruct``, numpy's constructors and ``np.random`` (and ``Generator`` methods),
``.astype``, ``.reshape``, ``.T``; ``read_literal`` a plain int/float/bool/str/None argument;
``binding`` the value a name is bound to at a use (the latest plain assignment above it in the
innermost scope that binds it). Anything uncertain raises ``Unresolved`` with the reason.
"""

from __future__ import annotations

from typing import Any

from tree_sitter import Node

from .resolve import call_arguments, callee_tail, own_nodes
from .sites import dtype_name
from .source import Source, enclosing_function, is_in

MAX_DEPTH = 12
DTYPES = {"float32", "bfloat16", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
          "uint32", "uint64", "bool", "bool_", "float8_e4m3fn", "float8_e5m2", "float8_e4m3b11fnuz",
          "int4", "uint4", "complex64"}
_NARROW = {"float64": "float32", "int64": "int32", "uint64": "uint32", "complex128": "complex64"}
_SHAPE_FIRST = {"ones", "zeros", "empty", "full", "ShapeDtypeStruct"}
_LIKE = {"ones_like", "zeros_like", "empty_like", "full_like"}
_PASS = {"asarray", "array", "device_put", "block_until_ready"}
_JAX_RANDOM_SHAPE_SECOND = {"normal", "uniform", "randint", "gumbel", "laplace", "logistic", "exponential",
                            "bits", "cauchy", "rademacher"}


class Unresolved(Exception):
    """Why one argument's shape could not be read (the message names it and its line)."""



NOT_LITERAL = object()


def read_literal(source: Source, node: Node, use: Node) -> Any:
    """A plain Python literal argument (int, float, bool, None, str), else ``NOT_LITERAL``."""
    node = _unparen(node)
    for _ in range(MAX_DEPTH):  # a name bound to a literal (``scale = 0.5``)
        if node.type != "identifier":
            break
        bound = binding(source, source.node_text(node), use)
        if bound is None or bound.type not in ("true", "false", "none", "float", "string", "integer",
                                               "unary_operator", "binary_operator", "identifier"):
            break
        node, use = _unparen(bound), bound
    if node.type in ("true", "false", "none"):
        return {"true": True, "false": False, "none": None}[node.type]
    if node.type == "float" or (node.type == "unary_operator" and node.named_children
                                and node.named_children[-1].type == "float"):
        try:
            return float(source.node_text(node).replace("_", ""))
        except ValueError:
            return NOT_LITERAL
    if node.type == "string" and not source.node_text(node).startswith(("f", "F")):
        return source.node_text(node)[1:-1]
    if node.type in ("integer", "binary_operator", "unary_operator") or node.type == "identifier":
        value = _int(source, node, use, 0, quiet=True)
        if value is not None:
            return value
    return NOT_LITERAL


def read_array(source: Source, node: Node, use: Node, depth: int = 0) -> tuple[tuple[int, ...], str]:
    """The (shape, dtype) ``node`` makes at ``use`` (see the module docstring); ``Unresolved`` says why not."""
    if depth > MAX_DEPTH:
        raise Unresolved("too many indirections")
    node = _unparen(node)
    if node.type == "identifier":
        bound = binding(source, source.node_text(node), use)
        if bound is None:
            raise Unresolved(f"`{source.node_text(node)}` has no single binding above its use")
        return read_array(source, bound, bound, depth + 1)
    if node.type == "attribute" and source.node_text(node.child_by_field_name("attribute")) == "T":
        shape, dtype = read_array(source, node.child_by_field_name("object"), use, depth + 1)
        return tuple(reversed(shape)), dtype
    if node.type != "call":
        raise Unresolved(f"a {node.type.replace('_', ' ')} is not an array constructor")
    return _read_call(source, node, use, depth)


def _read_call(source: Source, node: Node, use: Node, depth: int) -> tuple[tuple[int, ...], str]:
    """A call's array: an array method, a jnp/np constructor, ``jax.device_put``, ``jax.random``, ``np.random``."""
    fn = node.child_by_field_name("function")
    qual = source.qualname(fn) or ""
    tail = callee_tail(source, node) or ""
    positional, keywords, _, splat = call_arguments(source, node)
    if fn is not None and fn.type == "attribute" and not qual.startswith(("jax", "numpy")):
        got = _read_method(source, fn, tail, qual, positional, keywords, use, depth)
        if got is not None:
            return got
    if splat:
        raise Unresolved("its arguments are spread with * or **")
    family = qual.rsplit(".", 1)[0] if "." in qual else ""
    if family in ("jax.numpy", "numpy") or qual == "jax.ShapeDtypeStruct":
        got = _read_constructor(source, family, tail, positional, keywords, use, depth)
        if got is not None:
            return got
    if qual in ("jax.device_put", "jax.block_until_ready") and positional:
        return read_array(source, positional[0], use, depth + 1)
    if family == "jax.random":
        return _jax_random(source, tail, positional, keywords, use)
    if family == "numpy.random":
        return _numpy_random(source, tail, positional, keywords, use, generator=False)
    raise Unresolved(f"`{qual or tail or source.node_text(fn)}` is not an array constructor pallasite reads")


def _read_method(source: Source, fn: Node, method: str, qual: str, positional: list[Node], keywords: dict[str, Node],
                 use: Node, depth: int) -> tuple[tuple[int, ...], str] | None:
    """An array method's result (``.astype``, ``.reshape``, ``.copy``, a ``Generator``'s draws), else None."""
    base = fn.child_by_field_name("object")
    if method == "astype" and (positional or "dtype" in keywords):
        shape, _ = read_array(source, base, use, depth + 1)
        return shape, _dtype(source, positional[0] if positional else keywords["dtype"], use)
    if method == "reshape":
        shape, dtype = read_array(source, base, use, depth + 1)
        dims = _shape(source, positional[0], use) if len(positional) == 1 else tuple(
            _int(source, d, use, 0) for d in positional)
        return _reshaped(shape, dims), dtype
    if method in ("block_until_ready", "copy"):
        return read_array(source, base, use, depth + 1)
    if method in ("standard_normal", "random", "normal", "uniform", "integers") and not qual:
        return _numpy_random(source, method, positional, keywords, use, generator=True)
    return None


def _read_constructor(source: Source, family: str, tail: str, positional: list[Node], keywords: dict[str, Node],
                      use: Node, depth: int) -> tuple[tuple[int, ...], str] | None:
    """A jnp/np constructor's array (or ``jax.ShapeDtypeStruct``'s), else None."""
    default = "float64" if family == "numpy" else "float32"
    if tail in _SHAPE_FIRST:
        return _shape_first(source, tail, positional, keywords, use, default)
    if tail in _LIKE:
        shape, dtype = read_array(source, positional[0], use, depth + 1) if positional else ((), default)
        dtype_node = keywords.get("dtype") or (positional[1] if tail != "full_like" and len(positional) > 1 else None)
        return shape, _dtype(source, dtype_node, use) if dtype_node is not None else dtype
    if tail in _PASS and family in ("jax.numpy", "numpy"):
        if not positional:
            raise Unresolved(f"{tail}() without an argument")
        shape, dtype = read_array(source, positional[0], use, depth + 1)
        dtype_node = keywords.get("dtype") or (positional[1] if len(positional) > 1 else None)
        return shape, _dtype(source, dtype_node, use) if dtype_node is not None else dtype
    if tail == "arange":
        ints = [_int(source, p, use, 0, quiet=True) for p in positional[:3]]
        if not positional or any(v is None for v in ints):
            raise Unresolved("arange() with bounds that are not static ints")
        start, stop, step = (0, ints[0], 1) if len(ints) == 1 else (ints[0], ints[1], ints[2] if len(ints) > 2 else 1)
        count = max(0, -(-(stop - start) // step)) if step else 0
        dtype_node = keywords.get("dtype") or (positional[3] if len(positional) > 3 else None)
        return (count,), _dtype(source, dtype_node, use) if dtype_node is not None else (
            "int64" if family == "numpy" else "int32")
    if tail == "eye":
        n = _int(source, positional[0], use, 0) if positional else None
        m_node = positional[1] if len(positional) > 1 else keywords.get("M")
        m = _int(source, m_node, use, 0) if m_node is not None and m_node.type != "none" else n
        dtype_node = keywords.get("dtype") or (positional[3] if len(positional) > 3 else None)
        return (n, m), _dtype(source, dtype_node, use) if dtype_node is not None else default
    return None


def _shape_first(source: Source, tail: str, positional: list[Node], keywords: dict[str, Node], use: Node,
                 default: str) -> tuple[tuple[int, ...], str]:
    """``ones/zeros/empty/full(shape, ...)`` and ``ShapeDtypeStruct(shape, dtype)``."""
    shape_node = positional[0] if positional else keywords.get("shape")
    dtype_index = 2 if tail == "full" else 1
    dtype_node = positional[dtype_index] if len(positional) > dtype_index else keywords.get("dtype")
    if shape_node is None:
        raise Unresolved(f"{tail}() without a shape")
    if dtype_node is None and tail == "full":
        fill = positional[1] if len(positional) > 1 else keywords.get("fill_value")
        dtype = "int32" if fill is not None and _int(source, fill, use, 0, quiet=True) is not None else default
    elif dtype_node is None and tail == "ShapeDtypeStruct":
        raise Unresolved("ShapeDtypeStruct() without a dtype")
    else:
        dtype = _dtype(source, dtype_node, use) if dtype_node is not None else default
    return _shape(source, shape_node, use), dtype


def _jax_random(source: Source, tail: str, positional: list[Node], keywords: dict[str, Node],
                use: Node) -> tuple[tuple[int, ...], str]:
    def arg(index: int, key: str) -> Node | None:
        return positional[index] if len(positional) > index else keywords.get(key)

    if tail in _JAX_RANDOM_SHAPE_SECOND:
        shape_node = arg(1, "shape")
        dtype_node = keywords.get("dtype")
        if dtype_node is None:
            dtype_node = {"randint": arg(4, "dtype"), "bits": arg(2, "dtype")}.get(tail, arg(2, "dtype"))
        default = {"randint": "int32", "bits": "uint32", "rademacher": "int32"}.get(tail, "float32")
    elif tail == "bernoulli":
        shape_node, dtype_node, default = arg(2, "shape"), None, "bool"
    elif tail == "truncated_normal":
        shape_node, dtype_node, default = arg(3, "shape"), arg(4, "dtype"), "float32"
    else:
        raise Unresolved(f"jax.random.{tail} is not read for shapes")
    if shape_node is None or shape_node.type == "none":
        raise Unresolved(f"jax.random.{tail}() without a shape")
    return _shape(source, shape_node, use), _dtype(source, dtype_node, use) if dtype_node is not None else default


def _numpy_random(source: Source, tail: str, positional: list[Node], keywords: dict[str, Node], use: Node,
                  *, generator: bool) -> tuple[tuple[int, ...], str]:
    if tail in ("randn", "rand") and not generator:
        return tuple(_int(source, p, use, 0) for p in positional), "float64"
    size_at = {"standard_normal": 0, "random": 0, "normal": 2, "uniform": 2, "integers": 2, "randint": 2,
               "random_sample": 0}.get(tail)
    if size_at is None:
        raise Unresolved(f"numpy.random.{tail} is not read for shapes")
    size = keywords.get("size") or (positional[size_at] if len(positional) > size_at else None)
    if size is None:
        raise Unresolved(f"{tail}() without a size")
    dtype_node = keywords.get("dtype")
    default = "int64" if tail in ("integers", "randint") else "float64"
    return _shape(source, size, use), _dtype(source, dtype_node, use) if dtype_node is not None else default


# --------------------------------------------------------------------------- shapes, dtypes, ints


def _shape(source: Source, node: Node, use: Node, depth: int = 0) -> tuple[int, ...]:
    node = _unparen(node)
    if depth > MAX_DEPTH:
        raise Unresolved("too many indirections")
    if node.type in ("tuple", "list"):
        items = [c for c in node.named_children if c.type != "comment"]
        return tuple(_int(source, item, use, 0) for item in items)
    if node.type == "identifier":
        bound = binding(source, source.node_text(node), use)
        if bound is not None:
            return _shape(source, bound, bound, depth + 1)
    if node.type == "attribute" and source.node_text(node.child_by_field_name("attribute")) == "shape":
        shape, _ = read_array(source, node.child_by_field_name("object"), use, depth + 1)
        return shape
    value = _int(source, node, use, 0, quiet=True)
    if value is not None:
        return (value,)
    raise Unresolved(f"the shape `{source.node_text(node)}` is not a tuple of static ints")


def _reshaped(shape: tuple[int, ...], dims: tuple[int, ...]) -> tuple[int, ...]:
    total = 1
    for d in shape:
        total *= d
    if dims.count(-1) == 1:
        known = 1
        for d in dims:
            known *= d if d != -1 else 1
        dims = tuple(total // known if d == -1 else d for d in dims)
    size = 1
    for d in dims:
        size *= d
    if size != total:
        raise Unresolved(f"reshape of {shape} to {dims} changes the size")
    return dims


def _dtype(source: Source, node: Node, use: Node, depth: int = 0) -> str:
    node = _unparen(node)
    if node.type == "identifier" and depth < MAX_DEPTH:
        bound = binding(source, source.node_text(node), use)
        if bound is not None:
            return _dtype(source, bound, bound, depth + 1)
    if node.type == "call" and callee_tail(source, node) == "dtype":
        positional, _, _, _ = call_arguments(source, node)
        if positional:
            return _dtype(source, positional[0], use, depth + 1)
    if node.type == "attribute" and source.node_text(node.child_by_field_name("attribute")) == "dtype":
        _, dtype = read_array(source, node.child_by_field_name("object"), use, depth + 1)
        return dtype
    name = dtype_name(source, node) or ""
    name = {"float": "float32", "int": "int32", "bool": "bool"}.get(name, name)
    if name not in DTYPES:
        raise Unresolved(f"the dtype `{source.node_text(node)}` is not one pallasite knows statically")
    return name


def canonical_dtype(source: Source, dtype: str) -> str:
    """The dtype jax gives the array: 64-bit narrowed unless the file enables x64."""
    if dtype == "bool_":
        return "bool"
    if "jax_enable_x64" in source.text:
        return dtype
    return _NARROW.get(dtype, dtype)


def _int(source: Source, node: Node | None, use: Node, depth: int, *, quiet: bool = False) -> int | None:
    value = _int_or_none(source, node, use, depth)
    if value is None and not quiet:
        raise Unresolved(f"`{source.node_text(node) if node is not None else '?'}` is not a static int")
    return value


def _int_or_none(source: Source, node: Node | None, use: Node, depth: int) -> int | None:
    if node is None or depth > MAX_DEPTH:
        return None
    node = _unparen(node)
    if node.type == "integer":
        return source.int_value(node)
    if node.type == "identifier":
        bound = binding(source, source.node_text(node), use)
        if bound is not None:
            return _int_or_none(source, bound, bound, depth + 1)
        return None
    if node.type == "unary_operator":
        inner = _int_or_none(source, node.named_children[-1], use, depth + 1) if node.named_children else None
        op = source.node_text(node.child_by_field_name("operator"))
        return None if inner is None else (-inner if op == "-" else inner if op == "+" else None)
    if node.type == "binary_operator":
        left = _int_or_none(source, node.child_by_field_name("left"), use, depth + 1)
        right = _int_or_none(source, node.child_by_field_name("right"), use, depth + 1)
        if left is None or right is None:
            return None
        op = source.node_text(node.child_by_field_name("operator"))
        try:
            value = {"+": lambda: left + right, "-": lambda: left - right, "*": lambda: left * right,
                     "//": lambda: left // right, "%": lambda: left % right,
                     "**": lambda: left ** right if 0 <= right <= 64 else None,
                     "<<": lambda: left << right if 0 <= right <= 64 else None}.get(op, lambda: None)()
        except ZeroDivisionError:
            return None
        return value if isinstance(value, int) else None
    if node.type == "call" and callee_tail(source, node) == "int":
        positional, _, _, _ = call_arguments(source, node)
        return _int_or_none(source, positional[0], use, depth + 1) if len(positional) == 1 else None
    return None


# --------------------------------------------------------------------------- names


def binding(source: Source, name: str, use: Node) -> Node | None:
    """The value ``name`` is bound to where ``use`` reads it: the latest plain assignment above the
    use in the innermost function (or module) that binds it; None when uncertain (a loop target,
    an augmented assignment, a parameter without an int default, an import) or not found."""
    scope = enclosing_function(use)
    while True:
        body = scope.child_by_field_name("body") if scope is not None else source.root
        found = _latest(source, body, name, use if is_in(use, body) else None)
        if found is not NOT_LITERAL:
            return found  # type: ignore[return-value]
        if scope is not None:
            default = _parameter_default(source, scope, name)
            if default is not NOT_LITERAL:
                return default  # type: ignore[return-value]
        if scope is None:
            return None
        scope = enclosing_function(scope)


def _latest(source: Source, body: Node, name: str, before: Node | None) -> Node | None | object:
    """The value of the latest binding of ``name`` in ``body`` (above ``before`` when given);
    ``NOT_LITERAL`` when ``body`` does not bind it, None when its binding is uncertain."""
    cache = source.cache.setdefault("inferred_bindings", {})
    key = body.id
    if key not in cache:
        cache[key] = _bindings(source, body)
    events = cache[key].get(name)
    if not events:
        return NOT_LITERAL
    limit = before.start_byte if before is not None else None
    chosen = [e for e in events if limit is None or e[0] < limit]
    if not chosen:
        return NOT_LITERAL if before is None else (events[-1][1] if len(events) == 1 else None)
    return chosen[-1][1]


def _bindings(source: Source, body: Node) -> dict[str, list[tuple[int, Node | None]]]:
    """name -> [(position, value or None when uncertain)] for the bindings of one scope body."""
    events: dict[str, list[tuple[int, Node | None]]] = {}

    def add(target: Node, value: Node | None, at: int) -> None:
        if target.type == "identifier":
            events.setdefault(source.node_text(target), []).append((at, value))
        elif target.type in ("pattern_list", "tuple_pattern", "list_pattern"):
            values = (value.named_children if value is not None and value.type in ("expression_list", "tuple", "list")
                      else None)
            targets = target.named_children
            for i, sub in enumerate(targets):
                add(sub, values[i] if values is not None and len(values) == len(targets) else None, at)

    for node in own_nodes(body):
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None:
                while right is not None and right.type == "assignment":  # a = b = value
                    right = right.child_by_field_name("right")
                add(left, right, node.end_byte)
        elif node.type in ("augmented_assignment", "for_statement", "for_in_clause", "with_item", "as_pattern",
                           "named_expression", "import_statement", "import_from_statement"):
            target = node.child_by_field_name("left") or node.child_by_field_name("name") or node
            for ident in (n for n in _walk_idents(target)):
                add(ident, None, node.start_byte)
    for stmt in body.named_children:  # defs and classes bind their names too
        inner = stmt.named_children[-1] if stmt.type == "decorated_definition" and stmt.named_children else stmt
        if inner.type in ("function_definition", "class_definition"):
            name = inner.child_by_field_name("name")
            if name is not None:
                events.setdefault(source.node_text(name), []).append((stmt.start_byte, None))
    for values in events.values():
        values.sort(key=lambda e: e[0])
    return events


def _walk_idents(node: Node):
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            yield n
        stack.extend(n.named_children)


def _parameter_default(source: Source, fn: Node, name: str) -> Node | None | object:
    params = fn.child_by_field_name("parameters")
    for param in params.named_children if params is not None else ():
        ident = param.child_by_field_name("name") if param.type in ("default_parameter",
                                                                     "typed_default_parameter") else param
        if ident is not None and ident.type == "typed_parameter" and ident.named_children:
            ident = ident.named_children[0]
        if ident is not None and ident.type == "identifier" and source.node_text(ident) == name:
            return param.child_by_field_name("value") if param.type.endswith("default_parameter") else None
    return NOT_LITERAL


def _unparen(node: Node) -> Node:
    while node.type == "parenthesized_expression" and node.named_child_count == 1:
        node = node.named_children[0]
    return node

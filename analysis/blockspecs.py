"""One ``pl.BlockSpec(...)`` read as a ``BlockSpecInfo``: block shape (ints, None for squeezed
dims, source text otherwise) with each dim's span and the constant it came from, the index_map's
arity and result count, and the memory space."""

from __future__ import annotations

from tree_sitter import Node

from .resolve import Scope, call_arguments, callee, elements, is_pallas_name, own_nodes, splat_kind
from .source import Source
from .types import BlockSpecInfo, Span


def block_spec(source: Source, scope: Scope, node: Node, role: str, position: int) -> BlockSpecInfo:
    """One entry of in_specs/out_specs. ``certain`` is False when it may stand for several specs."""
    resolved = scope.resolve(node)
    span = source.span(node)
    if resolved is None:
        return BlockSpecInfo(span=span, role=role, position=position, certain=False)  # type: ignore[arg-type]
    if resolved.type == "none":
        return BlockSpecInfo(span=span, role=role, position=position)  # type: ignore[arg-type]
    name = source.qualname(resolved)
    if is_pallas_name(name, "no_block_spec"):
        return BlockSpecInfo(span=span, role=role, position=position)  # type: ignore[arg-type]
    if resolved.type != "call" or not is_pallas_name(callee(source, resolved), "BlockSpec"):
        return BlockSpecInfo(span=span, role=role, position=position, certain=False)  # type: ignore[arg-type]
    span = source.span(resolved)
    positional, keywords, _, splat = call_arguments(source, resolved)
    shape_node = positional[0] if positional else keywords.get("block_shape")
    map_node = positional[1] if len(positional) > 1 else keywords.get("index_map")
    memory_node = keywords.get("memory_space")
    block_shape = dim_spans = dim_origins = None
    shape_span = None
    if shape_node is not None:
        shape_resolved = scope.resolve(shape_node)
        shape_span = source.span(shape_resolved)
        items = elements(source, scope, shape_resolved)
        if items is not None:
            dims: list[int | str | None] = []
            spans: list[Span] = []
            origins: list[Span | None] = []
            for item in items:
                dims.append(dim(source, scope, item))
                spans.append(source.span(item))
                origins.append(scope.origin(item))
            block_shape, dim_spans, dim_origins = tuple(dims), tuple(spans), tuple(origins)
    arity, results, map_span, def_span = _index_map(source, scope, map_node)
    memory = _memory_space(source, scope.resolve(memory_node)) if memory_node is not None else None
    return BlockSpecInfo(
        span=span,
        block_shape=block_shape,
        block_shape_span=shape_span,
        dim_spans=dim_spans or (),
        index_map_span=map_span,
        index_map_arity=arity,
        index_map_results=results,
        index_map_def_span=def_span,
        memory_space=memory,
        role=role,  # type: ignore[arg-type]
        position=position,
        dim_origins=dim_origins or (),
        certain=not splat,
    )


def dim(source: Source, scope: Scope, node: Node) -> int | str | None:
    if node.type == "none":
        return None
    number = scope.value(node)
    if number is not None:
        return number
    resolved = scope.resolve(node)
    if resolved is not None and resolved.type == "none":
        return None
    if resolved is not None and resolved.type == "call" and is_pallas_name(callee(source, resolved), "Squeezed"):
        return None
    if resolved is not None and is_pallas_name(source.qualname(resolved), "squeezed"):
        return None
    return source.node_text(node)


def _index_map(source: Source, scope: Scope, node: Node | None
               ) -> tuple[int | None, int | None, Span | None, Span | None]:
    """(arity, result count, span in the BlockSpec, the ``def`` header of a named function)."""
    if node is None:
        return None, None, None, None
    resolved = scope.resolve(node)
    if resolved is not None and resolved.type == "identifier":
        if source.node_text(resolved) in scope.shadowed:
            return None, None, source.span(node), None  # a parameter or rebound local: not the def of that name
        defn = source.function(source.node_text(resolved), near=node)
        if defn is None:
            return None, None, source.span(node), None
        return _def_arity(source, defn), _def_results(source, defn), source.span(node), _def_header(source, defn)
    if resolved is None or resolved.type != "lambda":
        return None, None, source.span(node), None
    params = resolved.child_by_field_name("parameters")
    arity: int | None = 0
    for param in params.named_children if params is not None else ():
        if splat_kind(param) or param.type == "keyword_separator":
            arity = None
            break
        if param.type in ("default_parameter",):
            arity = None
            break
        arity = (arity or 0) + 1
    body = resolved.child_by_field_name("body")
    return arity, _result_count(source, body), source.span(resolved), None


def _def_header(source: Source, defn: Node) -> Span:
    """From ``def`` to the end of the parameter list."""
    whole = source.span(defn)
    params = defn.child_by_field_name("parameters")
    if params is None:
        return Span(whole.line, whole.column, whole.line, whole.column + 3)
    end = source.span(params)
    return Span(whole.line, whole.column, end.end_line, end.end_column)


def _result_count(source: Source, body: Node | None) -> int | None:
    while body is not None and body.type == "parenthesized_expression" and body.named_child_count == 1:
        inner = body.named_children[0]
        if inner.type == "tuple":
            body = inner
            break
        body = inner
    if body is None or body.type not in ("tuple", "expression_list"):
        return None
    items = [c for c in body.named_children if c.type != "comment"]
    if any(c.type in ("list_splat", "parenthesized_list_splat") for c in items):
        return None
    return len(items)


def _def_arity(source: Source, defn: Node) -> int | None:
    params = defn.child_by_field_name("parameters")
    count = 0
    for param in params.named_children if params is not None else ():
        if splat_kind(param) or param.type in ("keyword_separator", "default_parameter", "typed_default_parameter"):
            return None
        count += 1
    return count


def _def_results(source: Source, defn: Node) -> int | None:
    counts = set()
    for node in own_nodes(defn.child_by_field_name("body")):
        if node.type == "return_statement":
            value = node.named_children[0] if node.named_children else None
            counts.add(_result_count(source, value))
    if len(counts) == 1:
        return counts.pop()
    return None


def _memory_space(source: Source, node: Node | None) -> str | None:
    if node is None:
        return None
    if node.type == "call":
        node = node.child_by_field_name("function")
    text = source.node_text(node)
    tail = text.rsplit(".", 1)[-1]
    return tail or None

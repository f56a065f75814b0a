"""Tier-0 rules on what a BlockSpec says, read before anything runs:

- PLS019 ``pl.BlockSpec(index_map, block_shape)``: the argument order of jax before 0.4.31. Today's
  BlockSpec takes ``block_shape`` first; given a function first, jax fails while tracing with a
  message about the block shape that names neither the BlockSpec nor the order. Said at the
  BlockSpec, with a fix that swaps the two arguments.
- PLS020 an ``index_map`` that names a block starting past the end of the array: for a map whose
  results are each a grid index (``i``), a grid index plus or times a constant (``i + 1``, ``2 * i``)
  or a constant, with the grid, the block and the array's dim all static ints, the largest block
  index the grid reaches times the block dim is at or past the dim. The block then lies wholly
  outside the array: the TPU copies memory the array does not own (a partial last block, from a
  ``pl.cdiv`` grid, is allowed and not reported). Only outputs are checked (``out_shape`` gives the
  dims in the source); an input's shape is known only when the code runs. Said at the grid's entry
  when the map returns the grid index as it is (the grid is too long), else at the index_map's
  result entry (``i + 1``), the other and the block shape related.
"""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from ..resolve import call_arguments, callee, is_pallas_name, scope_for
from ..source import calls_holding
from ..static_values import binding
from ..types import Finding, KernelSite, Related, Span
from .context import RuleContext, finding


def old_blockspec_order(ctx: RuleContext) -> Iterator[Finding]:
    source = ctx.source
    for node in _blockspec_calls(source):
        positional, keywords, _, splat = call_arguments(source, node)
        if splat or not positional or "block_shape" in keywords:
            continue
        first = positional[0]
        if not _is_function(source, first):
            continue
        second = positional[1] if len(positional) > 1 else keywords.get("index_map")
        if second is not None and _is_function(source, second):
            continue
        message = (f"{source.node_text(first)} is passed as the BlockSpec's first argument, its block_shape: "
                   "BlockSpec takes (block_shape, index_map) since jax 0.4.31 (the older order was "
                   "(index_map, block_shape)); jax fails while tracing, about the block shape.")
        fix = None
        if len(positional) == 2 and "index_map" not in keywords:
            fix = _swap_fix(source, node, positional[0], positional[1])
        yield finding("PLS019", message, source.span(first), fix=fix)


def _blockspec_calls(source) -> Iterator[Node]:
    """The file's calls of Pallas's ``BlockSpec``. Only a call whose bytes hold a name that can stand
    for it (``BlockSpec``, or a name imported as it) can be one: those are found with a search of the
    text in C and a bisect per call (``source.calls``, kept per statement between edits), then
    resolved through the imports. Tier 0 runs after each edit: walking splash attention's whole tree
    for its calls, or resolving all 470 of them, cost milliseconds."""
    words = {"BlockSpec", *(alias for alias, dotted in source.imports.items() if dotted.rsplit(".", 1)[-1] == "BlockSpec")}
    for node in calls_holding(source, words):
        if is_pallas_name(callee(source, node), "BlockSpec"):
            yield node


def _is_function(source, node: Node) -> bool:
    if node.type not in ("identifier", "parenthesized_expression", "lambda"):
        return False  # the scope resolves names and unwraps parentheses only: anything else is itself
    scope = scope_for(source, node)
    resolved = scope.resolve(node)
    if resolved is None:
        return False
    if resolved.type == "lambda":
        return True
    if resolved.type == "identifier":
        name = source.node_text(resolved)
        return name not in scope.shadowed and source.function(name, near=node) is not None
    return False


def _swap_fix(source, call: Node, first: Node, second: Node):
    a, b = source.span(first), source.span(second)
    from ..types import Fix, Span, TextEdit

    whole = Span(a.line, a.column, b.end_line, b.end_column)
    text = f"{source.node_text(second)}, {source.node_text(first)}"
    return Fix(title="Swap to BlockSpec(block_shape, index_map)", edits=(TextEdit(span=whole, new_text=text),))


def block_past_end(ctx: RuleContext) -> Iterator[Finding]:
    source = ctx.source
    for site in ctx.sites:
        grid = site.grid
        if not grid or not all(isinstance(g, int) and g > 0 for g in grid) or site.num_scalar_prefetch is None:
            continue
        if not site.out_specs or not site.out_shapes or len(site.out_specs) != len(site.out_shapes):
            continue
        for spec, shape in zip(site.out_specs, site.out_shapes):
            if not spec.certain or spec.via_span is not None or spec.index_map_span is None or spec.block_shape is None:
                continue
            if not isinstance(shape, tuple) or len(shape) != len(spec.block_shape):
                continue
            entries = _map_entries(source, spec.index_map_span, len(grid) + site.num_scalar_prefetch, len(grid))
            if entries is None or len(entries) != len(shape):
                continue
            for axis, (entry, reach) in enumerate(entries):
                block = spec.block_shape[axis]
                dim = shape[axis]
                block = 1 if block is None else block
                if reach is None or not isinstance(block, int) or not isinstance(dim, int):
                    continue
                last, grid_axis = reach(grid)
                if last is None or last * block < dim:
                    continue
                what = f"grid axis {grid_axis} runs to {grid[grid_axis] - 1}" if grid_axis is not None else "it is constant"
                message = (f"out_specs[{spec.position}]'s index_map gives block {last} on axis {axis} "
                           f"({source.node_text(entry)}; {what}): that block starts at {last * block}, past the "
                           f"output's {dim} there (block {block}); the TPU writes memory the array does not own.")
                related = tuple(r for r in (
                    Related(site.grid_span, f"the grid {tuple(grid)}") if site.grid_span is not None else None,
                    Related(spec.block_shape_span, "the block shape") if spec.block_shape_span is not None else None,
                ) if r is not None)
                place = source.span(entry)
                if entry.type == "identifier" and grid_axis is not None and site.grid_span is not None:
                    # the map names the block its grid index gives: the grid is one too long
                    place = grid_entry(source, site.grid_span, grid_axis) or site.grid_span
                    related = (Related(source.span(entry), "the index_map entry that names the block"),) + related[1:]
                yield finding("PLS020", message, place, kernel=site.kernel_name, related=related)
                break


def grid_entry(source, grid_span: Span, axis: int) -> Span | None:
    """Where entry ``axis`` of the grid written at ``grid_span`` is: the tuple itself, or the tuple a name there
    is bound to (``grid = (a, b)`` ... ``grid=grid``, analysis/static_values.binding); None when unknown."""
    node = source.node_at(grid_span, "tuple")
    if node is None:
        name = source.node_at(grid_span, "identifier")
        bound = binding(source, source.node_text(name), name) if name is not None else None
        node = bound if bound is not None and bound.type == "tuple" else None
    items = [c for c in node.named_children if c.type != "comment"] if node is not None else []
    return source.span(items[axis]) if axis < len(items) else None


def _map_entries(source, span, arity: int, grid_rank: int):
    """[(result node, grid -> (largest block index, grid axis)) or (node, None)] of a lambda index_map."""
    node = source.node_at(span, "lambda")
    if node is None:
        return None
    params = node.child_by_field_name("parameters")
    names = [source.node_text(p) for p in (params.named_children if params is not None else ())]
    if len(names) != arity or any(not n.isidentifier() for n in names):
        return None
    body = node.child_by_field_name("body")
    while body is not None and body.type == "parenthesized_expression" and body.named_child_count == 1:
        body = body.named_children[0]
    if body is None or body.type not in ("tuple", "expression_list"):
        return None
    axes = {n: i for i, n in enumerate(names[:grid_rank])}
    scope = scope_for(source, node)
    out = []
    for item in body.named_children:
        if item.type == "comment":
            continue
        out.append((item, _reach(source, scope, item, axes)))
    return out


def _reach(source, scope, item: Node, axes: dict[str, int]):
    """A function of the grid giving (the largest value ``item`` takes, its grid axis), when ``item``
    is a grid index, that index plus/times a non-negative constant, or a constant."""
    if item.type == "identifier" and source.node_text(item) in axes:
        axis = axes[source.node_text(item)]
        return lambda grid: (grid[axis] - 1, axis)
    if item.type == "binary_operator":
        left, right = item.child_by_field_name("left"), item.child_by_field_name("right")
        op = source.node_text(item.child_by_field_name("operator"))
        for index, const in ((left, right), (right, left)):
            if index is None or const is None or index.type != "identifier" or source.node_text(index) not in axes:
                continue
            value = scope.value(const)
            if value is None or value < 0 or const.type == "identifier" and source.node_text(const) in axes:
                continue
            axis = axes[source.node_text(index)]
            if op == "+":
                return lambda grid: (grid[axis] - 1 + value, axis)
            if op == "*":
                return lambda grid: ((grid[axis] - 1) * value, axis)
        return None
    value = scope.value(item) if item.type == "integer" else None
    if value is not None and value >= 0:
        return lambda grid: (value, None)
    return None


RULES = (old_blockspec_order, block_past_end)

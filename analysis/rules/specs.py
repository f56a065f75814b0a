"""Tier-0 rules on the shape of a pallas_call: grid, index_maps, dimension_semantics, counts.

- PLS002 index_map arity vs grid rank (+ num_scalar_prefetch)
- PLS003 index_map result count vs block rank
- PLS004 dimension_semantics length vs grid rank (fix: append "arbitrary" / trim)
- PLS005 kernel parameter count vs scalar prefetch + inputs + outputs + scratch
- PLS008 out_specs count vs out_shape count
- PLS012 grid entries that are not ints (true division, float literals; fix: ``/`` -> ``//``)
"""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from ..resolve import elements, scope_for
from ..source import Source
from ..types import BlockSpecInfo, Finding, KernelSite, Related, Span
from .context import RuleContext, finding, replace, tpu_sites


def grid_rank(site: KernelSite) -> int | None:
    """The grid's rank when certain: from the grid tuple, or 0 when no grid is given at all."""
    if site.grid is not None:
        return len(site.grid)
    names = {name for name, _ in site.keyword_spans}
    if "grid" not in names and "grid_spec" not in names:
        return 0
    return None


def _specs(site: KernelSite) -> Iterator[tuple[str, BlockSpecInfo]]:
    for spec in site.in_specs or ():
        yield f"in_specs[{spec.position}]", spec
    for spec in site.out_specs or ():
        yield f"out_specs[{spec.position}]", spec


def index_map_arity(ctx: RuleContext) -> Iterator[Finding]:
    for site in ctx.sites:
        rank = grid_rank(site)
        if rank is None or site.num_scalar_prefetch is None:
            continue
        expected = rank + site.num_scalar_prefetch
        said_at: set[Span] = set()
        for label, spec in _specs(site):
            if spec.index_map_arity is None or spec.index_map_span is None or spec.index_map_arity == expected:
                continue
            # a function of the file: its parameters are written at its def (said once however
            # many BlockSpecs share it); a lambda: in the BlockSpec
            place = spec.index_map_def_span or spec.index_map_span
            if place in said_at:
                continue
            said_at.add(place)
            prefetch = (f" plus {site.num_scalar_prefetch} scalar-prefetch ref(s)"
                        if site.num_scalar_prefetch else "")
            related = (Related(span=site.grid_span, message=f"the grid ({rank} dimension(s))"),) \
                if site.grid_span is not None else ()
            if spec.index_map_def_span is not None:
                related = (Related(span=spec.index_map_span, message=f"where {label} uses this index_map"),) + related
            yield finding(
                "PLS002",
                f"The index_map of {label} takes {spec.index_map_arity} parameter(s), but Pallas calls it "
                f"with {expected}: one per grid dimension (grid rank {rank}){prefetch}. "
                f"Give it exactly {expected} parameter(s).",
                place, kernel=site.kernel_name, related=related)


def index_map_results(ctx: RuleContext) -> Iterator[Finding]:
    for site in ctx.sites:
        for label, spec in _specs(site):
            if spec.block_shape is None or spec.index_map_results is None or spec.index_map_span is None:
                continue
            if spec.index_map_results == len(spec.block_shape):
                continue
            yield finding(
                "PLS003",
                f"The index_map of {label} returns {spec.index_map_results} index(es), but its block_shape "
                f"has {len(spec.block_shape)} dimension(s). Return one block index per block dimension.",
                spec.index_map_span, kernel=site.kernel_name)


def semantics_length(ctx: RuleContext) -> Iterator[Finding]:
    for site in tpu_sites(ctx):
        rank = grid_rank(site)
        semantics, span = site.dimension_semantics, site.dimension_semantics_span
        if rank is None or semantics is None or span is None or len(semantics) == rank:
            continue
        fix = _semantics_fix(ctx.source, span, rank)
        yield finding(
            "PLS004",
            f"dimension_semantics has {len(semantics)} entr{'y' if len(semantics) == 1 else 'ies'} but the "
            f"grid has {rank} dimension(s). List one of \"parallel\"/\"arbitrary\" per grid dimension "
            "(\"arbitrary\" is always safe; \"parallel\" only where grid steps are independent).",
            span, fix=fix, kernel=site.kernel_name)


def _semantics_fix(source: Source, span: Span, rank: int):
    node = source.node_at(span)
    if node is not None and node.type == "identifier":
        node = scope_for(source, node).resolve(node)  # ``dimension_semantics=SEMANTICS``: edit its tuple
    if node is None or node.type not in ("tuple", "list"):
        return None
    span = source.span(node)
    items = [source.node_text(c) for c in node.named_children if c.type != "comment"]
    if len(items) < rank:
        missing = rank - len(items)
        items += ['"arbitrary"'] * missing
        title = f"Append \"arbitrary\" for the {missing} missing grid dimension(s)"
    else:
        items = items[:rank]
        title = f"Keep the first {rank} dimension_semantics entr{'y' if rank == 1 else 'ies'}"
    if node.type == "list":
        text = "[" + ", ".join(items) + "]"
    else:
        text = "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return replace(title, span, text)


def kernel_params(ctx: RuleContext) -> Iterator[Finding]:
    for site in ctx.sites:
        params = site.kernel_params
        if params is None or site.kernel_def_span is None or any(p.startswith("*") for p in params):
            continue
        counts = ref_counts(site)
        if counts is None:
            continue
        prefetch, inputs, outputs, scratch = counts
        expected = prefetch + inputs + outputs + scratch
        optional = _defaulted(ctx.source, site.kernel_def_span, params)
        if len(params) - optional <= expected <= len(params):
            continue  # parameters with defaults may be left unfilled
        parts = [f"{inputs} input(s)", f"{outputs} output(s)", f"{scratch} scratch buffer(s)"]
        if prefetch:
            parts.insert(0, f"{prefetch} scalar-prefetch ref(s)")
        span = _def_header(ctx.source, site.kernel_def_span)
        call_line = site.span.line + 1
        yield finding(
            "PLS005",
            f"Kernel {site.kernel_name}() takes {len(params)} ref parameter(s) ({', '.join(params) or 'none'}), "
            f"but the pallas_call on line {call_line} passes {expected}: " + " + ".join(parts) + ". "
            "Refs come in that order; add or remove parameters to match.",
            span, kernel=site.kernel_name,
            related=(Related(span=site.call_span, message="the pallas_call that passes the refs"),))


def _defaulted(source: Source, def_span: Span, params: tuple[str, ...]) -> int:
    """How many of ``params`` have default values in the kernel's def."""
    node = source.node_at(def_span, "function_definition")
    parameters = node.child_by_field_name("parameters") if node is not None else None
    count = 0
    for param in parameters.named_children if parameters is not None else ():
        if param.type in ("default_parameter", "typed_default_parameter"):
            name = param.child_by_field_name("name")
            if name is not None and source.node_text(name) in params:
                count += 1
    return count


def ref_counts(site: KernelSite) -> tuple[int, int, int, int] | None:
    """(scalar-prefetch, inputs, outputs, scratch) ref counts when all are certain, else None."""
    if site.num_scalar_prefetch is None or site.scratch_shapes is None:
        return None
    if site.in_specs is None or not all(s.certain for s in site.in_specs):
        return None
    if site.out_specs is not None and all(s.certain for s in site.out_specs) and site.out_shape_count is not None:
        outputs = site.out_shape_count
    elif site.out_specs is None and site.out_shape_count is not None:
        outputs = site.out_shape_count
    else:
        return None
    if site.operands is not None and len(site.operands) != site.num_scalar_prefetch + len(site.in_specs):
        return None  # in_specs disagree with the operands: a different mistake, for the lowering to name
    return site.num_scalar_prefetch, len(site.in_specs), outputs, len(site.scratch_shapes)


def _def_header(source: Source, def_span: Span) -> Span:
    node = source.node_at(def_span, "function_definition")
    params = node.child_by_field_name("parameters") if node is not None else None
    if node is None or params is None:
        return Span.whole_line(def_span.line, source.text)
    end = source.span(params)
    return Span(def_span.line, def_span.column, end.end_line, end.end_column)


def out_specs_count(ctx: RuleContext) -> Iterator[Finding]:
    for site in ctx.sites:
        if site.out_specs is None or site.out_shape_count is None:
            continue
        if not all(s.certain for s in site.out_specs) or len(site.out_specs) == site.out_shape_count:
            continue
        spec_node = _keyword_value(ctx.source, site, "out_specs")
        shape_node = _keyword_value(ctx.source, site, "out_shape")
        if spec_node is None or shape_node is None:
            continue
        scope = scope_for(ctx.source, spec_node)
        if scope.resolve(spec_node).type not in ("list", "tuple") or scope.resolve(shape_node).type not in ("list", "tuple"):
            continue  # a single spec for a pytree of outputs: leave it to the lowering
        yield finding(
            "PLS008",
            f"out_specs lists {len(site.out_specs)} BlockSpec(s) but out_shape has {site.out_shape_count} "
            "output(s). Give exactly one BlockSpec per output.",
            ctx.source.span(spec_node), kernel=site.kernel_name)


def _keyword_value(source: Source, site: KernelSite, name: str) -> Node | None:
    span = site.keyword_span(name)
    if span is None:
        return None
    node = source.node_at(span, "keyword_argument")
    return node.child_by_field_name("value") if node is not None else None


def grid_types(ctx: RuleContext) -> Iterator[Finding]:
    for site in ctx.sites:
        grid = _keyword_value(ctx.source, site, "grid")
        if grid is None:
            continue
        scope = scope_for(ctx.source, grid)
        items = elements(ctx.source, scope, grid)
        for item in items if items is not None else [scope.resolve(grid)]:
            if item is None:
                continue
            while item.type == "parenthesized_expression" and item.named_child_count == 1:
                item = item.named_children[0]
            if item.type == "float":
                yield finding(
                    "PLS012",
                    f"Grid entry {ctx.source.node_text(item)} is a float; grid sizes must be ints. "
                    "Write it as an int literal.",
                    ctx.source.span(item), kernel=site.kernel_name,
                    fix=_int_literal_fix(ctx.source, item))
            elif item.type == "binary_operator":
                op = item.child_by_field_name("operator")
                if op is not None and ctx.source.node_text(op) == "/":
                    yield finding(
                        "PLS012",
                        f"Grid entry `{ctx.source.node_text(item)}` uses true division (/), which gives a "
                        "float; grid sizes must be ints. Use floor division (//) or pl.cdiv(a, b).",
                        ctx.source.span(item), kernel=site.kernel_name,
                        fix=replace("Use floor division (//)", ctx.source.span(op), "//"))


def _int_literal_fix(source: Source, node: Node):
    try:
        value = float(source.node_text(node))
    except ValueError:
        return None
    if value != int(value):
        return None
    return replace(f"Use the int {int(value)}", source.span(node), str(int(value)))


RULES = (index_map_arity, index_map_results, semantics_length, kernel_params, out_specs_count, grid_types)

"""Tier-0 rule PLS013: a static slice of a kernel ref that reaches past the ref's block.

Inside a kernel, ``x_ref`` is a window of its BlockSpec's block shape (dims given as ``None`` or
``pl.Squeezed()`` are dropped), or of its scratch shape; not of the whole array. A slice with a
static start and stop (``x_ref[0:256, :]``), a ``pl.ds(start, size)`` / ``pl.dslice`` with static
ints, or a static integer index, that goes past a dim of that window reads or writes memory the
block does not own: neither the lowering nor the compiler rejects it. Only what is certain is
reported: every number must resolve statically (literals, module constants, tunable defaults),
the ref name must not be rebound in the kernel, and the kernel's parameters must line up with the
call's specs (scalar prefetch, inputs, outputs, scratch).
"""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from ..resolve import callee_tail, scope_for
from ..source import walk
from ..types import Finding, KernelSite, Related, Span
from .context import RuleContext, finding, tpu_sites


def static_ref_bounds(ctx: RuleContext) -> Iterator[Finding]:
    source = ctx.source
    for site in tpu_sites(ctx):
        if site.kernel_def_span is None or site.kernel_params is None:
            continue
        kernel = source.node_at(site.kernel_def_span, "function_definition")
        if kernel is None:
            continue
        windows = _ref_windows(site)
        if not windows:
            continue
        body = kernel.child_by_field_name("body")
        rebound = _rebound_names(source, body)
        scope = scope_for(source, body.named_children[0] if body is not None and body.named_children else kernel)
        for node in walk(body) if body is not None else ():
            if node.type != "subscript":
                continue
            value = node.child_by_field_name("value")
            if value is None or value.type != "identifier":
                continue
            name = source.node_text(value)
            if name not in windows or name in rebound:
                continue
            shape, spec_span, what = windows[name]
            problem = _out_of_bounds(source, scope, node, shape)
            if problem is None:
                continue
            axis, reach, size = problem
            message = (f"{source.node_text(node)} reaches index {reach} of axis {axis}, but {name} holds a block of "
                       f"{size} there ({what} block {tuple(shape)}): a static slice past the block reads or writes "
                       "memory this block does not own; the compiler does not check it.")
            yield finding("PLS013", message, source.span(node), kernel=site.kernel_name,
                          related=_related(spec_span, what))


def _related(span: Span | None, what: str) -> tuple:
    return (Related(span, f"the {what} that sets the block shape"),) if span is not None else ()


def _ref_windows(site: KernelSite) -> dict[str, tuple[tuple[int, ...], Span | None, str]]:
    """Kernel ref parameter name -> (its window's static shape, where that shape is written, what)."""
    params = list(site.kernel_params or ())
    if any(p.startswith("*") for p in params):
        return {}
    prefetch = site.num_scalar_prefetch
    ins, outs = site.in_specs, site.out_specs
    if prefetch is None or ins is None or outs is None:
        return {}
    if any(not spec.certain for spec in tuple(ins) + tuple(outs)):
        return {}
    scratch = site.scratch_shapes or ()
    if len(params) != prefetch + len(ins) + len(outs) + len(scratch):
        return {}
    out: dict[str, tuple[tuple[int, ...], Span | None, str]] = {}
    names = params[prefetch:]
    for name, spec in zip(names, tuple(ins) + tuple(outs)):
        shape = spec.block_shape
        if shape is None or spec.memory_space in ("ANY", "SMEM", "HBM"):
            continue
        dims = tuple(d for d in shape if d is not None)
        if all(isinstance(d, int) for d in dims) and dims:
            out[name] = (dims, spec.span, "BlockSpec")
    for name, buf in zip(names[len(ins) + len(outs):], scratch):
        if buf.shape and all(isinstance(d, int) for d in buf.shape) and buf.kind.upper().endswith("VMEM"):
            out[name] = (tuple(buf.shape), buf.span, "scratch buffer")
    return out


def _rebound_names(source, body: Node | None) -> set[str]:
    names: set[str] = set()
    for node in walk(body) if body is not None else ():
        if node.type in ("assignment", "augmented_assignment", "for_statement"):
            todo = [node.child_by_field_name("left")]
            while todo:  # bare names and unpacking patterns rebind; ``x_ref[...] = v`` does not
                target = todo.pop()
                if target is None:
                    continue
                if target.type == "identifier":
                    names.add(source.node_text(target))
                elif target.type in ("pattern_list", "tuple_pattern", "list_pattern", "tuple", "list"):
                    todo.extend(target.named_children)
    return names


def _out_of_bounds(source, scope, node: Node, shape: tuple[int, ...]) -> tuple[int, int, int] | None:
    """(axis, first index past the block it reaches, block size) for a static index past the block."""
    items = [c for c in node.children_by_field_name("subscript") if c.type != "comment"]
    if len(items) == 1 and items[0].type in ("tuple", "expression_list"):
        items = [c for c in items[0].named_children if c.type != "comment"]
    if any(c.type == "ellipsis" for c in items[:-1]) or len(items) > len(shape):
        return None
    for axis, item in enumerate(items):
        if item.type == "ellipsis":
            break
        size = shape[axis]
        reach = _static_reach(source, scope, item)
        if reach is not None and reach > size:
            return axis, reach - 1, size
    return None


def _static_reach(source, scope, item: Node) -> int | None:
    """One past the last index ``item`` touches, when certain (None: dynamic or open-ended)."""
    if item.type == "slice":
        parts = [c for c in item.children if c.type != "comment"]
        colons = [i for i, c in enumerate(parts) if c.type == ":"]
        if len(colons) != 1:
            return None  # a step: leave it
        stop = [c for c in parts[colons[0] + 1:] if c.type != ":"]
        if not stop:
            return None
        value = scope.value(stop[0])
        return value if value is not None and value > 0 else None
    if item.type == "call" and callee_tail(source, item) in ("ds", "dslice"):
        args = item.child_by_field_name("arguments")
        values = [c for c in args.named_children if c.type != "comment"] if args is not None else []
        if len(values) != 2 or any(v.type == "keyword_argument" for v in values):
            return None
        start, size = scope.value(values[0]), scope.value(values[1])
        if start is None or size is None or start < 0 or size <= 0:
            return None
        return start + size
    value = scope.value(item)
    if value is not None and value >= 0 and item.type in ("integer", "identifier", "binary_operator"):
        return value + 1
    return None


RULES = (static_ref_bounds,)

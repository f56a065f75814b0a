"""Tier-0 rules PLS021 / PLS022: a grid whose floor division drops the tail of an array.

``grid=(k // BK,)`` with ``k`` = 1024 and ``BK`` = 384 runs 2 steps: blocks 0 and 1 of 384 cover 768 of
the 1024, and the last 256 are never read (an input, PLS022, a warning: another call may handle the tail)
or never written (an output, PLS021, an error: they hold whatever the memory held). Neither the lowering
nor the compiler says anything; an interpret run only finds wrong numbers, far from the cause. The rule
fires only when everything is certain from the source and the shapes tier 0 knows (the task's
``example_inputs()``, as the tiling rule reads them):

- a grid entry written ``dim // B``, ``dim`` an array dim (``x.shape[1]``, or a name bound once by
  ``m, k = x.shape`` / ``k = x.shape[1]`` in the entry) and ``B`` a static int (a literal, a module
  constant, a tunable default);
- a BlockSpec of the call whose index_map returns that grid axis's index as it is at some position, with
  the block dim there equal to ``B``, over an array whose dim there is known: ``dim // B`` steps of ``B``
  then reach ``(dim // B) * B`` of it, and ``dim % B`` is left over.

Said at the constant that makes it so (where ``B`` is written: a module constant, a tunable default), with
the numbers, the grid entry and the BlockSpec related. Cheap on every keystroke: a call whose grid has no
``//`` entry, or whose function has no task with shapes, is passed over before any tree is walked.
"""

from __future__ import annotations

from math import isqrt
from typing import Iterator

from tree_sitter import Node

from ..resolve import scope_for
from ..source import enclosing_function, walk
from ..types import BlockSpecInfo, Finding, KernelSite, Related
from .context import RuleContext, finding, tpu_sites
from .spec_reach import _map_entries
from .tiling import ArrayResolver


def grid_coverage(ctx: RuleContext) -> Iterator[Finding]:
    source = ctx.source
    for site in tpu_sites(ctx):
        if not site.grid or site.grid_span is None or site.num_scalar_prefetch is None or \
                not any(isinstance(g, str) and "//" in g for g in site.grid):
            continue
        call = source.node_at(site.span, "call")
        grid = source.node_at(site.grid_span, "tuple") if call is not None else None
        if grid is None:
            continue
        resolver = ArrayResolver(ctx, site, call)
        if resolver.examples is None:
            continue
        dims = _ShapeNames(ctx, resolver, call)
        scope = scope_for(source, call)
        items = [c for c in grid.named_children if c.type != "comment"]
        for axis, item in enumerate(items):
            split = dims.floor_division(scope, item)
            if split is None:
                continue
            size, block, block_node = split
            if size % block == 0:
                continue
            for role, spec, array in _blocked_along(source, site, resolver, dims, axis, len(items), block):
                yield _finding(source, site, scope, item, block_node, role, spec, array, size, block)
                break


class _ShapeNames:
    """The entry's array dims by name: ``m, k = x.shape`` and ``k = x.shape[1]`` (each name bound once in the
    function holding the call), and ``x.shape[i]`` itself, for ``x`` an argument with a known shape."""

    def __init__(self, ctx: RuleContext, resolver: ArrayResolver, call: Node) -> None:
        self.source, self.resolver = ctx.source, resolver
        self.names: dict[str, tuple[str, int]] = {}
        fn = enclosing_function(call)
        body = fn.child_by_field_name("body") if fn is not None else None
        counts: dict[str, int] = {}
        for node in walk(body) if body is not None else ():
            if node.type not in ("assignment", "augmented_assignment"):
                continue
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            targets = [left] if left is not None and left.type == "identifier" else \
                list(left.named_children) if left is not None and left.type in ("pattern_list", "tuple_pattern") else []
            for index, target in enumerate(targets):
                if target.type != "identifier":
                    continue
                name = self.source.node_text(target)
                counts[name] = counts.get(name, 0) + 1
                dim = self._shape_of(right, index if len(targets) > 1 else None) if node.type == "assignment" else None
                if dim is not None:
                    self.names[name] = dim
        for name, count in counts.items():
            if count > 1:
                self.names.pop(name, None)

    def _shape_of(self, node: Node | None, index: int | None) -> tuple[str, int] | None:
        """(argument, dim) for ``x.shape`` unpacked at ``index``, or ``x.shape[i]``."""
        if node is None:
            return None
        if index is not None:
            return (self._shape_attribute(node), index) if self._shape_attribute(node) else None
        if node.type == "subscript":
            owner = self._shape_attribute(node.child_by_field_name("value"))
            subs = [c for c in node.children_by_field_name("subscript") if c.type != "comment"]
            if owner and len(subs) == 1 and subs[0].type == "integer":
                return owner, int(self.source.node_text(subs[0]))
        return None

    def _shape_attribute(self, node: Node | None) -> str | None:
        """``x`` for ``x.shape``."""
        if node is None or node.type != "attribute":
            return None
        obj, attr = node.child_by_field_name("object"), node.child_by_field_name("attribute")
        if obj is None or obj.type != "identifier" or attr is None or self.source.node_text(attr) != "shape":
            return None
        return self.source.node_text(obj)

    def dim(self, node: Node | None) -> int | None:
        """The int an array-dim expression stands for at the example inputs."""
        if node is None:
            return None
        while node.type == "parenthesized_expression" and node.named_child_count == 1:
            node = node.named_children[0]
        ref = self.names.get(self.source.node_text(node)) if node.type == "identifier" else self._shape_of(node, None)
        if ref is None:
            return None
        array = self.resolver._by_name(ref[0])
        if array is None:
            return None
        shape = array[0]
        axis = ref[1] if ref[1] >= 0 else len(shape) + ref[1]
        return shape[axis] if 0 <= axis < len(shape) else None

    def floor_division(self, scope, item: Node) -> tuple[int, int, Node] | None:
        """(dim, block, the block's node) for a grid entry ``dim // block``."""
        if item.type != "binary_operator" or self.source.node_text(item.child_by_field_name("operator")) != "//":
            return None
        left, right = item.child_by_field_name("left"), item.child_by_field_name("right")
        size, block = self.dim(left), scope.value(right)
        if size is None or block is None or block <= 0:
            return None
        return size, block, right


def _blocked_along(source, site: KernelSite, resolver: ArrayResolver, dims: _ShapeNames, axis: int, rank: int,
                   block: int) -> Iterator[tuple[str, BlockSpecInfo, tuple[int, ...]]]:
    """(role, spec, array shape) of each BlockSpec whose index_map returns grid axis ``axis``'s index as it is at
    a position whose block dim is ``block``; outputs first (their tail is never written)."""
    for role, specs in (("out", site.out_specs), ("in", site.in_specs)):
        for spec in specs or ():
            if not spec.certain or spec.via_span is not None or spec.index_map_span is None or not spec.block_shape:
                continue
            array = _array(site, resolver, dims, role, spec)
            if array is None or len(array) != len(spec.block_shape):
                continue
            entries = _map_entries(source, spec.index_map_span, rank + site.num_scalar_prefetch, rank)
            if entries is None or len(entries) != len(spec.block_shape):
                continue
            for position, (entry, _) in enumerate(entries):
                if entry.type == "identifier" and _grid_index(source, spec, entry) == axis and \
                        spec.block_shape[position] == block:
                    yield role, spec, array + (position,)
                    break


def _grid_index(source, spec: BlockSpecInfo, entry: Node) -> int | None:
    """Which lambda parameter (grid axis) ``entry`` names."""
    node = source.node_at(spec.index_map_span, "lambda")
    params = node.child_by_field_name("parameters") if node is not None else None
    names = [source.node_text(p) for p in (params.named_children if params is not None else ())]
    name = source.node_text(entry)
    return names.index(name) if name in names else None


def _array(site: KernelSite, resolver: ArrayResolver, dims: _ShapeNames, role: str,
           spec: BlockSpecInfo) -> tuple[int, ...] | None:
    """The array's shape under ``spec``: an input's from the example inputs, an output's from ``out_shape``
    (literal dims, ``x.shape``, or names bound to array dims)."""
    known = resolver.array(role, spec.position)
    if known is not None:
        return tuple(known[0])
    if role != "out" or not site.out_shapes or spec.position >= len(site.out_shapes):
        return None
    shape = site.out_shapes[spec.position]
    if not isinstance(shape, tuple):
        return None
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, str) and d.isidentifier() and d in dims.names:
            ref = dims.names[d]
            array = resolver._by_name(ref[0])
            if array is None or not -len(array[0]) <= ref[1] < len(array[0]):
                return None
            out.append(array[0][ref[1]])
        else:
            return None
    return tuple(out)


def _finding(source, site: KernelSite, scope, item: Node, block_node: Node, role: str, spec: BlockSpecInfo,
             array: tuple[int, ...], size: int, block: int) -> Finding:
    *shape, position = array
    steps, covered = size // block, (size // block) * block
    left = size - covered
    operand = f"{role}_specs[{spec.position}]"
    if role == "in" and site.operands and site.num_scalar_prefetch is not None and \
            len(site.operands) > site.num_scalar_prefetch + spec.position:
        operand = f"{site.operands[site.num_scalar_prefetch + spec.position]} ({operand})"
    verb = "written" if role == "out" else "read"
    expression = source.node_text(item)
    name = source.node_text(block_node)
    ran = f"{steps} step{'s' if steps != 1 else ''}" if steps else "0 steps: the kernel never runs"
    divisors = _divisors(size, block, position, len(shape))
    message = (f"grid entry {expression} = {size} // {block} = {ran}: blocks of {block} along dim {position} of "
               f"{operand}, an array of {tuple(shape)}, reach {covered} of its {size}; the last {left} are never "
               f"{verb} (floor division drops the tail). Use a {name} that divides {size}"
               + (f" (e.g. {divisors})" if divisors else "")
               + f", or pl.cdiv({source.node_text(item.child_by_field_name('left'))}, {name}) steps with the tail "
               "masked.")
    origin = scope.origin(block_node) if block_node.type == "identifier" else None
    place = origin or source.span(block_node)
    related = [Related(source.span(item), f"the grid entry {expression}: {steps} step{'s' if steps != 1 else ''}")]
    if origin is not None:
        related.append(Related(source.span(block_node), f"{name} ({block}) divides the array dim here"))
    if spec.block_shape_span is not None:
        related.append(Related(spec.block_shape_span, f"the block shape of {role}_specs[{spec.position}]"))
    return finding("PLS021" if role == "out" else "PLS022", message, place, kernel=site.kernel_name,
                   related=tuple(related))


def _divisors(size: int, block: int, position: int, rank: int) -> str:
    """Up to two block sizes nearest ``block`` that divide ``size`` and keep the TPU tiling of that dim."""
    unit = 128 if position == rank - 1 else 8 if position == rank - 2 else 1
    small = [d for d in range(1, isqrt(size) + 1) if size % d == 0]
    every = {*small, *(size // d for d in small)}
    found = sorted((d for d in every if d % unit == 0), key=lambda d: (abs(d - block), d))
    return " or ".join(str(d) for d in sorted(found[:2]))


RULES = (grid_coverage,)

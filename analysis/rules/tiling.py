"""Tier-0 tiling rules: block shapes the TPU cannot tile, reported only when certain.

- PLS001: the Pallas TPU lowering requires the last block dim to be a multiple of 128 and the
  second-to-last a multiple of 8, *unless the dim equals the array's dim*. Source rarely knows the
  array dims, so the rule fires only when they are literal: an ``out_shape`` with literal dims, or
  an input of the task's entry whose ``example_inputs()`` states its shape.
- PLS010: 8-bit types tile as 32 rows (16-bit ones pass with 8), seen on v4, v5e, v5p and v6e
  with jax 0.10.2 + libtpu 0.0.42.1; only the real compiler says so (tier 2). Pinned by a libtpu
  probe test (tests/test_tier0_compiler.py). The rule fires only when the block's dtype is
  certain (from out_shape or example_inputs).

Blocks in SMEM/ANY/HBM or of rank < 2 are left alone (other rules of the lowering apply), and so
are calls run in interpret mode (see ``rules.tpu_sites``).
Fixes round the dim to the nearest legal multiple, editing the module constant or tunable
default the dim came from when there is one (so the grid arithmetic follows).
"""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from ..dtypes import EIGHT_BIT
from ..resolve import scope_for
from ..source import enclosing_function, is_module_level
from ..tasks import example_shapes
from ..types import BlockSpecInfo, Finding, KernelSite, KernelTask, Related, Span
from .context import RuleContext, finding, replace, tpu_sites

_UNTILED_SPACES = ("SMEM", "ANY", "HBM", "SEMAPHORE", "CMEM")

Array = tuple[tuple[int, ...], str | None]


def nearest_multiple(value: int, multiple: int) -> int:
    """The nearest positive multiple of ``multiple`` (ties round up)."""
    return max(multiple, ((value + multiple // 2) // multiple) * multiple)


def tiling(ctx: RuleContext) -> Iterator[Finding]:
    for site, spec, label, array in _blocks(ctx):
        shape, _ = array
        dims = spec.block_shape
        for axis, multiple, name in ((-1, 128, "last (lane)"), (-2, 8, "second-to-last (sublane)")):
            block, full = dims[axis], shape[axis]
            if not isinstance(block, int) or block == full or block % multiple == 0:
                continue
            new = nearest_multiple(block, multiple)
            span, related = _placed(spec, axis, block)
            yield finding(
                "PLS001",
                f"Block dim {block} of {label} ({name} dim of block {_shape(dims)}) is not a multiple of "
                f"{multiple} and not the array's full dim {full} (array {_shape(shape)}). The TPU lowering "
                f"rejects it: use a multiple of {multiple} (e.g. {new}) or the full dim {full}.",
                span, kernel=site.kernel_name, fix=_round_fix(spec, axis, new), related=related)


def sublane_packing(ctx: RuleContext) -> Iterator[Finding]:
    for site, spec, label, array in _blocks(ctx):
        shape, dtype = array
        if dtype not in EIGHT_BIT:
            continue
        rows, full = spec.block_shape[-2], shape[-2]
        if not isinstance(rows, int) or rows == full or rows % 8 != 0 or rows % 32 == 0:
            continue  # not a multiple of 8 at all is PLS001's business
        new = nearest_multiple(rows, 32)
        span, related = _placed(spec, -2, rows)
        yield finding(
            "PLS010",
            f"{dtype} block {_shape(spec.block_shape)} of {label} has {rows} rows; 8-bit types tile as "
            f"32 rows on TPU ({ctx.target}), so the TPU compiler rejects it (Mosaic misaligned block and "
            f"tiling). Use a multiple of 32 rows (e.g. {new}) or the full dim {full}.",
            span, kernel=site.kernel_name, fix=_round_fix(spec, -2, new), related=related)


def _shape(dims) -> str:
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


def _placed(spec: BlockSpecInfo, axis: int, value: int) -> tuple[Span, tuple[Related, ...]]:
    """(span, related) of a finding about one block dim: where its value was written (a module
    constant, a tunable default) when that is not the BlockSpec itself, with the BlockSpec's dim
    related; else the dim in the BlockSpec (issue 14: a finding names the line that set the value)."""
    origins = spec.dim_origins
    origin = origins[axis] if origins and len(origins) == len(spec.dim_spans) else None
    if origin is None or spec.span.line <= origin.line <= spec.span.end_line:
        return spec.dim_spans[axis], _origin(spec, axis, value)
    return origin, (Related(span=spec.dim_spans[axis], message=f"the BlockSpec dim that uses the value {value}"),)


def _origin(spec: BlockSpecInfo, axis: int, value: int) -> tuple[Related, ...]:
    """Where the dim's value is defined, when it came from a constant or tunable default."""
    origins = spec.dim_origins
    if not origins or len(origins) != len(spec.dim_spans) or origins[axis] is None:
        return ()
    return (Related(span=origins[axis], message=f"the block dim's value {value} is defined here"),)


def _round_fix(spec: BlockSpecInfo, axis: int, new: int):
    origins = spec.dim_origins
    target: Span | None = origins[axis] if origins and len(origins) == len(spec.dim_spans) else None
    if target is not None:
        return replace(f"Set it to {new} where it is defined", target, str(new))
    return replace(f"Use {new}", spec.dim_spans[axis], str(new))


def _blocks(ctx: RuleContext) -> Iterator[tuple[KernelSite, BlockSpecInfo, str, Array]]:
    """(site, spec, label, (array shape, dtype)) for each rank>=2 tiled block whose array is known."""
    for site in tpu_sites(ctx):
        call = ctx.source.node_at(site.span, "call")
        if call is None:
            continue
        resolver = ArrayResolver(ctx, site, call)
        for role, specs in (("in", site.in_specs), ("out", site.out_specs)):
            for spec in specs or ():
                dims = spec.block_shape
                if dims is None or len(dims) < 2 or len(spec.dim_spans) != len(dims):
                    continue
                if spec.memory_space and spec.memory_space.upper() in _UNTILED_SPACES:
                    continue
                array = resolver.array(role, spec.position)
                if array is None or len(array[0]) != len(dims):
                    continue
                yield site, spec, f"{role}_specs[{spec.position}]", array


class ArrayResolver:
    """Array shapes/dtypes of a call's operands and outputs, when the source makes them literal."""

    def __init__(self, ctx: RuleContext, site: KernelSite, call: Node) -> None:
        self.ctx, self.site = ctx, site
        self.params: dict[str, int] = {}
        self.examples: tuple | None = None
        fn = enclosing_function(call)
        if fn is None or not is_module_level(fn):
            return
        name = ctx.source.node_text(fn.child_by_field_name("name"))
        task = _task_for(ctx.tasks, name)
        if task is None:
            return
        self.examples = example_shapes(ctx.source, task.inputs)
        scope = scope_for(ctx.source, call)
        params = fn.child_by_field_name("parameters")
        index = 0
        for param in params.named_children if params is not None else ():
            if param.type in ("keyword_separator",) or param.type.endswith("splat_pattern"):
                break
            if param.type == "identifier":
                pname = ctx.source.node_text(param)
            elif param.type == "typed_parameter":
                first = param.named_children[0] if param.named_children else None
                if first is None or first.type != "identifier":
                    break
                pname = ctx.source.node_text(first)
            else:
                break  # parameters with defaults: the inputs may not reach them positionally
            if pname not in scope.assigned and pname not in scope.ints:
                self.params[pname] = index
            index += 1

    def _by_name(self, name: str) -> Array | None:
        if self.examples is None or name not in self.params:
            return None
        index = self.params[name]
        return self.examples[index] if index < len(self.examples) else None

    def array(self, role: str, position: int) -> Array | None:
        site = self.site
        if role == "in":
            if site.operands is None or site.num_scalar_prefetch is None:
                return None
            if site.in_specs is None or not all(s.certain for s in site.in_specs):
                return None
            if len(site.operands) != site.num_scalar_prefetch + len(site.in_specs):
                return None
            return self._by_name(site.operands[site.num_scalar_prefetch + position])
        if site.out_shapes is None or site.out_specs is None or not all(s.certain for s in site.out_specs):
            return None
        if len(site.out_specs) != len(site.out_shapes) or position >= len(site.out_shapes):
            return None
        shape, dtype = site.out_shapes[position], (site.out_dtypes or (None,) * len(site.out_shapes))[position]
        resolved_shape: tuple[int, ...] | None = None
        if isinstance(shape, tuple) and all(isinstance(d, int) for d in shape):
            resolved_shape = shape  # type: ignore[assignment]
        elif isinstance(shape, str) and shape.endswith(".shape"):
            source_array = self._by_name(shape[: -len(".shape")])
            resolved_shape = source_array[0] if source_array else None
        if resolved_shape is None:
            return None
        if isinstance(dtype, str) and dtype.endswith(".dtype"):
            source_array = self._by_name(dtype[: -len(".dtype")])
            dtype = source_array[1] if source_array else None
        return resolved_shape, dtype


def _task_for(tasks: tuple[KernelTask, ...], entry: str) -> KernelTask | None:
    for task in tasks:
        if task.entry == entry:
            return task
    return None


RULES = (tiling, sublane_packing)

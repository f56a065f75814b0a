"""Tier-0 VMEM rule (PLS015): blocks that cannot fit the scoped VMEM, said before any compile.

A pallas_call's pipeline holds every VMEM block twice (double-buffered; once with
``pipeline_mode=pl.Buffered(1)``) plus its VMEM scratch buffers, within the scoped-VMEM limit the
compiler applies: the call's ``vmem_limit_bytes`` when set, else the chip's default (measured per
chip by a libtpu probe and cached, ``pallasite chips``; the checker passes it in as
``RuleContext.scoped_vmem``; without it only calls that set vmem_limit_bytes are checked). The
compiler needs at least that much (it adds internal scratch of
its own), so when the blocks whose size and dtype are known statically already exceed the limit,
the compile is certain to fail with a scoped-VMEM out-of-memory error: the rule says so at the
line that set the size of the largest block (a dict entry, a constant, a default:
``analysis/origins.py``), with the BlockSpec and the pallas_call related. Pinned to the compiler
by a tier-2 probe test (tests/test_tier0_vmem.py): at the threshold the rule fires exactly when
the compile fails. Nothing is said when the limit or no block is known.
"""

from __future__ import annotations

import ast
import math
from typing import Iterator

from ..call_values import pallas_call_at
from ..dtypes import DTYPE_BITS, block_bytes
from ..footprint import in_vmem, scratch_bytes, static_dims
from ..origins import Origin, Tracer, callee_name, functions_around, trace
from ..types import BlockSpecInfo, Finding, KernelSite, Related, Span
from .context import RuleContext, finding, python_tree, tpu_sites
from .tiling import ArrayResolver


def vmem(ctx: RuleContext) -> Iterator[Finding]:
    tree = python_tree(ctx.source)
    if tree is None:
        return
    for site in tpu_sites(ctx):
        limit, limit_said = _limit(ctx, tree, site)
        if limit is None:
            continue
        blocks = list(_blocks(ctx, site, tree))
        scratch = sum(size for s in site.scratch_shapes or () if (size := scratch_bytes(s)) is not None)
        need = sum(b for _, b, _ in blocks) + scratch
        if not blocks or need <= limit:
            continue
        spec, nbytes, buffers = max(blocks, key=lambda b: b[1])
        place, related = _place(ctx, spec, tree)
        related += (Related(site.call_span or site.span, "the pallas_call"),)
        yield finding(
            "PLS015",
            f"this pallas_call's VMEM blocks need at least {_mib(need)} (each block x {buffers} buffers, plus "
            f"{_mib(scratch)} of scratch) but {limit_said} is {_mib(limit)}: the TPU compiler will fail with a "
            f"scoped-VMEM out-of-memory error. The largest block, {spec.role}_specs[{spec.position}] "
            f"{_shape(spec.block_shape)}, takes {_mib(nbytes)}; shrink the blocks or raise vmem_limit_bytes "
            "in the compiler params (up to the chip's VMEM).",
            place, kernel=site.kernel_name, related=related)


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def _shape(dims) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in dims) + ")"


def _blocks(ctx: RuleContext, site: KernelSite, tree: ast.Module) -> Iterator[tuple[BlockSpecInfo, int, int]]:
    """(spec, bytes of its buffers, buffers) for each VMEM block whose size and dtype are known."""
    call = ctx.source.node_at(site.span, "call")
    if call is None:
        return
    resolver = ArrayResolver(ctx, site, call)
    for role, specs in (("in", site.in_specs), ("out", site.out_specs)):
        for spec in specs or ():
            if not spec.certain or not in_vmem(spec) or spec.block_shape is None:
                continue
            dims = static_dims(ctx.source.text, spec, tree)
            array = resolver.array(role, spec.position)
            dtype = array[1] if array else None
            bits = DTYPE_BITS.get((dtype or "").rsplit(".", 1)[-1])
            if dims is None or bits is None:
                continue
            buffers = 1 if "pipeline_mode" in _text(ctx, spec.span) else 2  # Buffered(n): at least one buffer
            yield spec, buffers * block_bytes(math.prod(dims), bits), buffers


def _text(ctx: RuleContext, span: Span) -> str:
    """The source of ``span``'s lines (sliced by offset: splitting the whole text per spec was quadratic)."""
    source = ctx.source
    return source.data[source.offset(span.line, 0):source.offset(span.end_line + 1, 0)].decode("utf-8", "replace")


def _limit(ctx: RuleContext, tree: ast.Module, site: KernelSite) -> tuple[int | None, str]:
    """The scoped limit the call runs under: its vmem_limit_bytes (None when set but not static),
    else the chip's default."""
    call = pallas_call_at(tree, site.span)
    if call is None:
        return None, ""
    params = next((k.value for k in call.keywords if k.arg == "compiler_params"), None)
    default = (ctx.scoped_vmem, f"{ctx.target}'s default scoped-VMEM limit") if ctx.scoped_vmem else (None, "")
    if params is None:
        return default
    tracer = Tracer(tree, ctx.source.text)
    chain = functions_around(call)
    value = _keyword_value(tracer, params, chain, "vmem_limit_bytes")
    if value is _ABSENT:
        return default
    origin = tracer.origin(value, chain) if value is not None else None
    if origin is None or origin.kind == "expression" or not isinstance(origin.value, int):
        number = _arithmetic(value)
        return (number, "its vmem_limit_bytes") if number is not None else (None, "")
    return origin.value, "its vmem_limit_bytes"


_ABSENT = object()


def _keyword_value(tracer: Tracer, params: ast.expr, chain: list, key: str):
    """The ``key`` keyword of a ``CompilerParams(...)`` call or ``{"mosaic": {...}}`` dict; _ABSENT
    when the params say nothing of it, None when they cannot be read."""
    if isinstance(params, ast.Name):
        bound = tracer.binding(params.id, chain)
        if bound is None:
            return None
        params, chain = bound.value, bound.chain
    if isinstance(params, ast.Call) and (callee_name(params) or "").endswith("CompilerParams"):
        if any(k.arg is None for k in params.keywords):
            return None
        return next((k.value for k in params.keywords if k.arg == key), _ABSENT)
    if isinstance(params, ast.Call) and callee_name(params) == "dict":
        inner = next((k.value for k in params.keywords if k.arg in ("mosaic", "mosaic_tpu")), None)
        return _keyword_value(tracer, inner, chain, key) if inner is not None else None
    if isinstance(params, ast.Dict):
        for k, v in zip(params.keys, params.values):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
            if isinstance(k, ast.Constant) and k.value in ("mosaic", "mosaic_tpu"):
                return _keyword_value(tracer, v, chain, key)
        return _ABSENT
    return None


def _arithmetic(node: ast.expr | None) -> int | None:
    """``64 * 1024 * 1024``: literal arithmetic, evaluated."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.LShift)):
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        if left is None or right is None:
            return None
        return {ast.Mult: left * right, ast.Add: left + right, ast.Sub: left - right,
                ast.LShift: left << right}[type(node.op)]
    return None


def _place(ctx: RuleContext, spec: BlockSpecInfo, tree: ast.Module) -> tuple[Span, tuple[Related, ...]]:
    """The line that set the largest dim of the block (when written outside the BlockSpec), with
    the BlockSpec related; else the BlockSpec."""
    best: Origin | None = None
    for span in spec.dim_spans:
        origin = trace(ctx.source.text, span, tree=tree)
        if origin is None or origin.kind == "expression" or not isinstance(origin.value, int):
            continue
        if spec.span.line <= origin.line <= spec.span.end_line:
            continue
        if best is None or origin.value > best.value:
            best = origin
    if best is None:
        return spec.span, ()
    return best.span, (Related(spec.span, f"the BlockSpec of the largest block (its dim {best.value} is set at the "
                                          f"marked line: {best.what})"),)


RULES = (vmem,)

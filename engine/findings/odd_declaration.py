"""A shape error inside a kernel caused by one declared block or scratch dim, said at that declaration
(client side, never imports jax).

A block entry off by a few (``pl.BlockSpec((bk, r - 4), ...)``) or a scratch dim halved
(``pltpu.VMEM((l // 2, r), ...)``) lowers fine on its own; the kernel then adds, multiplies or stores
blocks of different shapes, and jax's trace fails at that statement: ``add got incompatible shapes for
broadcasting: (512, 512), (512, 508)``, ``dot_general requires contracting dimensions to have the same
shape, got (124,) and (128,)``, ``Invalid shape for swap ... Value shape: (1024, 2048)``. The statement is
where it shows; the declaration is what is off. ``to_odd_declaration`` reads the shapes the message
names, and among the sizes where they differ finds the one that a single dim of the call's declared
buffers has (the worker's ``ReachedCall.buffers``: every block and scratch buffer of the call as it ran)
while the other size is shared by several: that dim's entry in its ``BlockSpec`` or ``VMEM(...)`` is
the place, the statement that failed is related. When the sizes are common to several buffers, a scratch
buffer of exactly one of the shapes next to an output block of exactly the other is the one that is off
(an accumulator takes the output tile's shape). Anything less clear-cut leaves the finding where it was.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Mapping

from ...analysis.types import Related, Span

from .origin_findings import Moved

MISMATCH = re.compile(r"incompatible shapes|contracting dimensions to have the same shape|Invalid shape for `swap`"
                      r"|must have (?:the )?same shape|shapes? must (?:be equal|match)|got incompatible", re.I)
_SHAPE = re.compile(r"\((\d+(?:,\s*\d+)*),?\)")
CODES = ("PLS100", "PLS103", "PLS104")
_ACCESSED = re.compile(r"of an? (?:VMEM|SMEM) buffer of shape \((?P<shape>\d+(?:,\s*\d+)*),?\)")


def to_odd_declaration(code: str, rec: Mapping[str, Any], site: Any, reached: Any, lines: list[str],
                       span: Span) -> Moved | None:
    """The finding moved to the declared dim that differs from the shapes the kernel combines it with."""
    if code not in CODES or site is None or not reached:
        return None
    message = f"{rec.get('message') or ''} {rec.get('sentence') or ''}"
    if not MISMATCH.search(message):
        return None
    sizes = _differing(message, broadcast="broadcast" in message)
    buffers = _buffers(site, reached)
    if len(sizes) < 2 or not buffers:
        return None
    holders = {v: [(role, index, d) for role, index, shape in buffers for d, size in enumerate(shape) if size == v]
               for v in sizes}
    odd = [v for v in sizes if len(holders[v]) == 1]
    common = [v for v in sizes if len(holders[v]) >= 2]
    if len(odd) == 1 and common:
        (role, index, dim), = holders[odd[0]]
    else:
        found = _accumulator_off(message, buffers)
        if found is None:
            return None
        (role, index, dim), odd, common = found
    place = _dim_span(site, role, index, dim, lines)
    if place is None:
        return None
    what = "scratch buffer" if role == "scratch_shapes" else "block"
    said = (f"the {what} {role}[{index}] declares dim {dim} as {odd[0]} where the kernel combines it with "
            f"{' / '.join(map(str, common))} (the size the call's other blocks have there): this declaration is off")
    return Moved(span=place, related=(Related(span, "the kernel statement the declared shape breaks"),), sentence=said)


def to_empty_scratch(code: str, rec: Mapping[str, Any], site: Any, reached: Any, lines: list[str],
                     span: Span) -> Moved | None:
    """An out-of-bounds access (tier 3) of a scratch buffer declared with a dim of size 0: nothing fits in
    it, so every access is past its end and the declaration is off (``block_b // 2`` with one row a
    block). Said at that dim of its ``VMEM(...)``, the access related; only when the buffer's shape is
    one scratch buffer's alone."""
    if code != "PLS302" or site is None or not reached:
        return None
    m = _ACCESSED.search(f"{rec.get('message') or ''} {rec.get('sentence') or ''}")
    shape = tuple(int(x) for x in m.group("shape").split(",")) if m else ()
    if 0 not in shape:
        return None
    held = [(role, index) for role, index, declared in _buffers(site, reached) if declared == shape]
    scratch = [index for role, index in held if role == "scratch_shapes"]
    if len(scratch) != 1 or len(held) != 1:
        return None
    dim = shape.index(0)
    place = _dim_span(site, "scratch_shapes", scratch[0], dim, lines)
    if place is None:
        return None
    return Moved(span=place, related=(Related(span, "where tier 3 found the access past its end"),),
                 sentence=f"the scratch buffer scratch_shapes[{scratch[0]}] declares dim {dim} as 0 "
                          f"(shape {shape}): nothing fits in it, so this declaration is off")


def _accumulator_off(message: str, buffers: list[tuple[str, int, tuple[Any, ...]]]
                     ) -> tuple[tuple[str, int, int], list[int], list[int]] | None:
    """When the sizes alone do not single a dim out: two shapes of the message, one exactly a scratch
    buffer's and the other exactly an output block's, differing in one dim. An accumulator takes the
    output tile's shape, so the scratch is the one that is off."""
    shapes = [tuple(int(x) for x in m.group(1).split(",")) for m in _SHAPE.finditer(message)]
    for a in shapes:
        for b in shapes:
            diff = [d for d, (x, y) in enumerate(zip(a, b)) if x != y] if len(a) == len(b) else []
            if len(diff) != 1:
                continue
            scratch = [(r, i) for r, i, shape in buffers if r == "scratch_shapes" and shape == a]
            outs = [(r, i) for r, i, shape in buffers if r == "out_specs" and shape == b]
            if len(scratch) == 1 and outs:
                return (scratch[0][0], scratch[0][1], diff[0]), [a[diff[0]]], [b[diff[0]]]
    return None


def _differing(message: str, broadcast: bool = False) -> list[int]:
    """The sizes at the positions where two same-rank shapes of the message differ; for a broadcast, not
    where one is 1 (a bias row's 1 broadcasts: ``(128, 256) + (1, 128)`` is off in its last dim only)."""
    shapes = [tuple(int(x) for x in m.group(1).split(",")) for m in _SHAPE.finditer(message)]
    out: list[int] = []
    for i, a in enumerate(shapes):
        for b in shapes[i + 1:]:
            if len(a) != len(b) or a == b:
                continue
            for x, y in zip(a, b):
                if x != y and not (broadcast and 1 in (x, y)):
                    out += [v for v in (x, y) if v not in out]
    return out


def _buffers(site: Any, reached: Any) -> list[tuple[str, int, tuple[Any, ...]]]:
    from .reach import site_reached

    for call in reached or ():
        if call.get("buffers") and site_reached(site, [call]):
            return [(b["role"], int(b["index"]), tuple(b.get("shape") or ())) for b in call["buffers"]]
    return []


def _dim_span(site: Any, role: str, index: int, dim: int, lines: list[str]) -> Span | None:
    if role == "scratch_shapes":
        buffers = tuple(getattr(site, "scratch_shapes", None) or ())
        return _scratch_dim(buffers[index].span, dim, lines) if 0 <= index < len(buffers) else None
    specs = tuple(getattr(site, role, None) or ())
    spec = next((s for s in specs if s.position == index), None)
    if spec is None or not getattr(spec, "certain", True):
        return None
    if len(spec.dim_spans) > dim:
        return spec.dim_spans[dim]
    return spec.span


def _scratch_dim(span: Span, dim: int, lines: list[str]) -> Span:
    """The ``dim``-th entry of the shape tuple in ``VMEM((a, b), dtype)`` written at ``span`` (else the call)."""
    if span.line != span.end_line or not (0 <= span.line < len(lines)):
        return span
    text = lines[span.line][span.column:span.end_column]
    try:
        call = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return span
    shape = call.args[0] if isinstance(call, ast.Call) and call.args else None
    if not isinstance(shape, ast.Tuple) or dim >= len(shape.elts):
        return span
    e = shape.elts[dim]
    lead = len(text) - len(text.lstrip())
    return Span(span.line, span.column + lead + e.col_offset, span.line, span.column + lead + e.end_col_offset)

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
(an accumulator takes the output tile's shape). A reshape that fails (``cannot reshape (16, 4, 124) into
(64, 128)``) is read the same way: the size one declaration holds, where a size of the other side makes the
element counts equal. Lists of specs or buffers built apart from the call are read through their names
(``written_specs.py``). Anything less clear-cut leaves the finding where it was.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any, Mapping

from ...analysis.types import Related, Span

from .origin_findings import Moved, call_origins
from .written_specs import dim_span, one_arm

MISMATCH = re.compile(r"incompatible shapes|contracting dimensions to have the same shape|Invalid shape for `swap`"
                      r"|must have (?:the )?same shape|shapes? must (?:be equal|match)|got incompatible"
                      r"|Cannot concatenate arrays with shapes that differ|does not match previous terms", re.I)
_SHAPE = re.compile(r"\((\d+(?:,\s*\d+)*),?\)")
CODES = ("PLS100", "PLS103", "PLS104")
_ACCESSED = re.compile(r"\[\(?(?P<window>[-\d:,\s]*)\)?\] of an? (?:VMEM|SMEM) buffer of shape \((?P<shape>\d+(?:,\s*\d+)*),?\)")


def to_odd_declaration(code: str, rec: Mapping[str, Any], site: Any, reached: Any, lines: list[str],
                       span: Span) -> Moved | None:
    """The finding moved to the declared dim that differs from the shapes the kernel combines it with."""
    if code not in CODES or site is None or not reached:
        return None
    message = f"{rec.get('message') or ''} {rec.get('sentence') or ''}"
    read = _combined_off if MISMATCH.search(message) else _reshaped_off if _RESHAPE.search(message) else None
    # each call of the site as it ran (a task may make it twice, with other scratch): the first that explains it
    found = next((f for buffers in _calls_buffers(site, reached) if read and (f := read(message, buffers))), None)
    if found is None:
        return None
    (role, index, dim), odd, common = found
    place = _dim_span(site, role, index, dim, lines) or _origin_in_wrapper(site, reached, role, index, dim, lines)
    if place is None:
        return None
    what = "scratch buffer" if role == "scratch_shapes" else "block"
    why = (f"the kernel's reshape needs {common[0]} there" if not MISMATCH.search(message) else
           f"the kernel combines it with {' / '.join(map(str, common))} (the size the call's other blocks have there)")
    said = f"the {what} {role}[{index}] declares dim {dim} as {odd[0]} where {why}: this declaration is off"
    return Moved(span=place, related=(Related(span, "the kernel statement the declared shape breaks"),), sentence=said)


def to_untileable_block(code: str, rec: Mapping[str, Any], site: Any, reached: Any, lines: list[str],
                        span: Span) -> Moved | None:
    """A kernel statement that failed at tier 1 (a shape mismatch, an assertion) where one block entry of the
    call breaks the TPU lowering's own rule - the last two block dims multiples of 8 and 128, or the array's -
    and the message names that size (or is an assertion): the lowering checks block shapes only after the
    kernel traced, so the entry's error never showed. Said at that entry, the kernel statement related."""
    if code not in CODES or site is None or not reached:
        return None
    message = f"{rec.get('message') or ''} {rec.get('sentence') or ''}"
    off = [o for o in _untileable(site, reached)
           if re.search(rf"\b{o[3]}\b", message) or rec.get("type") == "AssertionError"]
    if len(off) != 1:
        return None
    role, index, dim, size, full, tile = off[0]
    place = _dim_span(site, role, index, dim, lines) or _origin_in_wrapper(site, reached, role, index, dim, lines)
    if place is None:
        return None
    said = (f"the block {role}[{index}] declares dim {dim} as {size}, neither a multiple of {tile} nor the array's "
            f"{full}: the TPU lowering requires the last two block dims to be multiples of 8 and 128 (or the "
            "array's own), so this declaration is off; the kernel statement it broke first is related")
    return Moved(span=place, related=(Related(span, "the kernel statement the declared shape breaks first"),),
                 sentence=said)


def _untileable(site: Any, reached: Any) -> list[tuple[str, int, int, int, int, int]]:
    """(role, index, dim, size, the array's size, tile) of each in/out block dim of the call that breaks the
    (8, 128) rule (blocks with a squeezed dim among their last two, and rank-1 blocks, are left alone)."""
    for call in _site_calls(site, reached):
        out = []
        for b in call["buffers"]:
            shape, array = list(b.get("shape") or ()), list(b.get("array") or ())
            if b["role"] == "scratch_shapes" or len(shape) < 2 or len(array) != len(shape) or None in shape[-2:]:
                continue
            for dim, tile in ((len(shape) - 2, 8), (len(shape) - 1, 128)):
                if shape[dim] % tile and shape[dim] != array[dim]:
                    out.append((b["role"], int(b["index"]), dim, int(shape[dim]), int(array[dim]), tile))
        if out:  # the first call of the site (a task may make it twice) with such a block
            return out
    return []


def to_short_scratch(code: str, rec: Mapping[str, Any], site: Any, reached: Any, lines: list[str],
                     span: Span) -> Moved | None:
    """An access (tier 3) past the end of a scratch buffer, in one dim: a dim declared 0 (nothing fits:
    ``block_b // 2`` with one row a block), or a dim of 1 the kernel indexes past (slot 1 of a double buffer
    declared one slot deep: why index a dim of one?). Said at that dim of its ``VMEM(...)``, the access related; only
    when the buffer's shape is one scratch buffer's alone."""
    if code != "PLS302" or site is None or not reached:
        return None
    m = _ACCESSED.search(f"{rec.get('message') or ''} {rec.get('sentence') or ''}")
    shape = tuple(int(x) for x in m.group("shape").split(",")) if m else ()
    dim = _short_dim(m.group("window"), shape) if m else None
    if dim is None:
        return None
    held = [(role, index) for role, index, declared in _buffers(site, reached) if declared == shape]
    scratch = [index for role, index in held if role == "scratch_shapes"]
    if not scratch or len(scratch) != len(held):
        return None
    # several scratch entries of that shape: one declaration when each is written at the same place (the m and l
    # buffers of ragged paged attention are one ``lm_scratch``)
    places = {_dim_span(site, "scratch_shapes", index, dim, lines, shape) for index in scratch}
    if len(places) != 1 or None in places:
        return None
    place = places.pop()
    said = (f"declares dim {dim} as 0 (shape {shape}): nothing fits in it" if shape[dim] == 0 else
            f"declares dim {dim} as {shape[dim]} (shape {shape}), and the kernel accesses index {shape[dim]} there")
    which = ", ".join(f"scratch_shapes[{i}]" for i in scratch)
    return Moved(span=place, related=(Related(span, "where tier 3 found the access past its end"),),
                 sentence=f"the scratch buffer {which} {said}, so this declaration is off")


def _short_dim(window: str, shape: tuple[int, ...]) -> int | None:
    """The one dim of size 1 an access window (``1, 0:8, 0:128``) runs past, else a dim of size 0; None when
    unclear."""
    items = [w.strip() for w in window.split(",") if w.strip()]
    if len(items) == len(shape):
        past = [d for d, (w, n) in enumerate(zip(items, shape))
                if (int(w.split(":")[1]) > n if ":" in w else int(w) >= n)]
        if len(past) == 1 and shape[past[0]] <= 1:  # a dim of one indexed past: the declaration (a wider dim
            return past[0]                            # read one past its end is as likely the index's fault)
    return shape.index(0) if 0 in shape else None


def _combined_off(message: str, buffers: list[tuple[str, int, tuple[Any, ...]]]
                  ) -> tuple[tuple[str, int, int], list[int], list[int]] | None:
    """Two shapes the kernel combines that differ where one size is a single buffer dim's and the other
    several buffers'; else the accumulator and store rules below."""
    sizes = _differing(message, broadcast="broadcast" in message)
    if len(sizes) < 2 or not buffers:
        return None
    holders = _holders(sizes, buffers)
    if len(holders.get(0, ())) == 1:  # a dim declared 0 holds nothing: never meant, whatever the others hold
        return holders[0][0], [0], [v for v in sizes if v != 0]
    odd = [v for v in sizes if len(holders[v]) == 1]
    common = [v for v in sizes if len(holders[v]) >= 2]
    if len(odd) == 1 and common:
        return holders[odd[0]][0], odd, common
    return _accumulator_off(message, buffers) or _stored_into_scratch(message, buffers)


_RESHAPE = re.compile(r"cannot reshape (?:array of )?shape \((?P<source>[\d, ]+)\).*? into shape \((?P<target>[\d, ]+)\)")


def _reshaped_off(message: str, buffers: list[tuple[str, int, tuple[Any, ...]]]
                  ) -> tuple[tuple[str, int, int], list[int], list[int]] | None:
    """A reshape whose element counts differ because one size on either side is a single declaration's (a
    block's, or one spec's used for an input and its output) where a size of the other side would make the
    counts equal: ``(16, 4, 124)`` into ``(64, 128)``, or ``(2, 16, 4, 128)`` into ``(128, 124)``."""
    m = _RESHAPE.search(message)
    source, target = (tuple(int(x) for x in m.group(g).replace(" ", "").strip(",").split(",")) for g in ("source", "target"))
    holders = _holders(sorted({v for shape in (source, target) for v in shape} - {0, 1}), buffers)
    shapes = {(role, index): shape for role, index, shape in buffers}
    found = {(v, w) for side, other in ((target, source), (source, target))
             for v in set(side) if _one_declaration(holders.get(v, []), shapes)
             for w in set(other) - {v} if math.prod(side) // v * w == math.prod(other)}
    if len(found) != 1:
        return None
    (v, w), = found
    return holders[v][0], [v], [w]


def _one_declaration(held: list[tuple[str, int, int]], shapes: dict) -> bool:
    """Held by one buffer dim, or by blocks of one shape at one dim (a spec used for an input and its output)."""
    return len(held) == 1 or (bool(held) and all(r != "scratch_shapes" for r, _, _ in held)
                              and len({(shapes[r, i], d) for r, i, d in held}) == 1)


def _holders(sizes, buffers) -> dict[int, list[tuple[str, int, int]]]:
    return {v: [(role, index, d) for role, index, shape in buffers for d, size in enumerate(shape) if size == v]
            for v in sizes}


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


_SWAP = re.compile(r"Invalid shape for `swap`\. Ref shape: \((?P<ref>[\d, ]+)\)\..*?Value shape: \((?P<value>[\d, ]+)\)")


def _stored_into_scratch(message: str, buffers: list[tuple[str, int, tuple[Any, ...]]]
                         ) -> tuple[tuple[str, int, int], list[int], list[int]] | None:
    """A store of a value into a ref of exactly one scratch buffer's shape (no block has it), differing in one
    dim whose size the value has and another buffer has too: the kernel computed the size its other
    buffers agree on, and the scratch buffer was declared otherwise (``VMEM((tm // 2, tn), ...)``)."""
    m = _SWAP.search(message)
    if m is None:
        return None
    ref, value = (tuple(int(x) for x in m.group(g).replace(" ", "").strip(",").split(",")) for g in ("ref", "value"))
    diff = [d for d, (x, y) in enumerate(zip(ref, value)) if x != y] if len(ref) == len(value) else []
    held = [(role, index) for role, index, shape in buffers if shape == ref]
    if len(diff) != 1 or len(held) != 1 or held[0][0] != "scratch_shapes":
        return None
    size = value[diff[0]]
    if not any(size in shape for role, index, shape in buffers if (role, index) != held[0]):
        return None
    return (held[0][0], held[0][1], diff[0]), [ref[diff[0]]], [size]


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
    return next(iter(_calls_buffers(site, reached)), [])


def _calls_buffers(site: Any, reached: Any) -> list[list[tuple[str, int, tuple[Any, ...]]]]:
    """(role, index, shape) of every buffer, for each reached call of ``site`` (in the order they ran)."""
    return [[(b["role"], int(b["index"]), tuple(b.get("shape") or ())) for b in call["buffers"]]
            for call in _site_calls(site, reached)]


def _site_calls(site: Any, reached: Any) -> list[Mapping[str, Any]]:
    """The reached calls of ``site`` that sent their buffers, in the order they ran."""
    from .reach import site_reached

    return [call for call in reached or () if call.get("buffers") and site_reached(site, [call])]


def _origin_in_wrapper(site: Any, reached: Any, role: str, index: int, dim: int, lines: list[str]) -> Span | None:
    """Where the dim's value was written as the program ran (``runner/origin_values.py``'s literals), when one of
    its places lies in the function making the call: a block entry of an if/elif chain, whose arm that ran the
    text alone cannot tell (megablox's ``rhs_block_spec``, paged attention's ``q_block_spec``)."""
    places = call_origins(site, reached).get(f"{role}[{index}][{dim}]") or ()
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None
    around = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
              and n.lineno <= site.span.line + 1 <= (n.end_lineno or n.lineno)]
    if not around:
        return None
    fn = max(around, key=lambda n: n.lineno)  # the innermost
    inside = [p for p in places if fn.lineno <= int(p[0]) <= (fn.end_lineno or fn.lineno)]
    if len(inside) != 1:
        return None
    line, column, end_column = (int(x) for x in inside[0])
    return Span(line - 1, column, line - 1, end_column)


def _dim_span(site: Any, role: str, index: int, dim: int, lines: list[str], declared: tuple | None = None
              ) -> Span | None:
    if role == "scratch_shapes":
        buffers = tuple(getattr(site, "scratch_shapes", None) or ())
        place = _scratch_dim(buffers[index].span, dim, lines) if 0 <= index < len(buffers) else None
        return place or dim_span("\n".join(lines), site.span, role, index, dim, declared)
    specs = tuple(getattr(site, role, None) or ())
    spec = next((s for s in specs if s.position == index), None)
    if spec is None or not getattr(spec, "certain", True):  # a list built apart from the call: read by name
        return dim_span("\n".join(lines), site.span, role, index, dim)
    if len(spec.dim_spans) > dim:
        return spec.dim_spans[dim]
    return spec.span


def _scratch_dim(span: Span, dim: int, lines: list[str]) -> Span | None:
    """The ``dim``-th entry of the shape tuple in ``VMEM((a, b), dtype)`` written at ``span`` (on one line or
    several; else the call; None when the text there is not such a call)."""
    if not (0 <= span.line <= span.end_line < len(lines)):
        return span
    parts = lines[span.line:span.end_line + 1]
    parts = [parts[0][span.column:]] + parts[1:] if len(parts) > 1 else [parts[0][span.column:span.end_column]]
    if span.end_line > span.line:
        parts[-1] = parts[-1][:span.end_column]
    try:
        call = ast.parse("(" + "\n".join(parts) + ")", mode="eval").body  # parenthesized: lines may break anywhere
    except SyntaxError:
        return span
    call = one_arm(call)
    if not isinstance(call, ast.Call):
        return None
    shape = call.args[0] if call.args else None
    if not isinstance(shape, ast.Tuple) or dim >= len(shape.elts):
        return span
    e = shape.elts[dim]
    end_line = e.end_lineno or e.lineno
    column = (span.column - 1 if e.lineno == 1 else 0) + e.col_offset  # the "(" added, on the first line only
    end_column = (span.column - 1 if end_line == 1 else 0) + (e.end_col_offset or e.col_offset)
    return Span(span.line + e.lineno - 1, column, span.line + end_line - 1, end_column)

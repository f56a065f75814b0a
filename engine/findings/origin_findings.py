"""Compiler findings about a value moved to where the value was written (client side, no jax).

First from the running program: the worker executes the user's file with its literals carrying
where they were written (``runner/origin_values.py``) and returns, per pallas_call it reached, the
places that made each block, scratch, grid and out_shape dim (``ReachedCall.origins``); a finding
about a dim goes to the literal that made it, whatever path the value took (dict entry, dataclass
field, attribute, argument, ``**options``, ``functools.partial``). Then, where the worker gave no
places (tier 0 alone, a value not made from the file's literals), from tier 0's static tracer:

The lowering names the BlockSpec whose block shape breaks the tiling rule (``Block spec for
args[1] ... has block shape (512, 200), array shape (512, 800)``). When the bad dim was not written
in that BlockSpec but came from a dict entry, a dataclass field, a keyword default or a module
constant (``analysis/origins.py`` follows it there), the finding is placed at that line, says what
was written there, and keeps the BlockSpec (and the pallas_call) as related places. A BlockSpec
that a branch chooses (``if transpose_rhs: spec = ... else: spec = ...``) is read from the branch
whose bad dim traces to the very value the message names.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ...analysis import ast_units
from ...analysis.call_values import output_dtype
from ...analysis.check_values import culprit, odd, shape_culprit
from ...analysis.footprint import static_dims
from ...analysis.origins import Origin, branch_block_shapes, parse, trace, trace_node
from ...analysis.types import BlockSpecInfo, Related, Span
from .store_dtype import store_declaration

_SHAPES = re.compile(r"block shape \((?P<block>.*?)\),\s*array shape \((?P<array>[^)]*)\)")
_DIM = re.compile(r"Blocked\(block_size=(?P<blocked>\d+)\)|(?P<other>Squeezed\(\)|None|[A-Za-z]\w*\([^)]*\))|(?P<int>\d+)")
MOVED_CODES = ("PLS101", "PLS204")


@dataclass(frozen=True)
class Moved:
    span: Span
    related: tuple[Related, ...]
    sentence: str


def message_block(message: str) -> list[int | None] | None:
    """The block shape the lowering's message gives ("(256, 100)" or "(Blocked(block_size=256), ...)";
    None for squeezed dims), or None when it gives none."""
    m = _SHAPES.search(message)
    if not m:
        return None
    return [int(d.group("blocked") or d.group("int")) if not d.group("other") else None
            for d in _DIM.finditer(m.group("block"))]


def bad_dims(code: str, message: str, rank: int) -> list[int]:
    """Indices (into the block shape) of the dims that break the rule the message states."""
    if rank < 2:
        return list(range(rank))
    if code == "PLS204":  # the dtype's row tiling: the second-to-last dim
        return [rank - 2]
    m = _SHAPES.search(message)
    if not m:
        return []  # which dim is bad is not said: the finding stays at the BlockSpec
    block = message_block(message) or []
    array = [int(x) for x in re.findall(r"\d+", m.group("array"))]
    if len(block) != rank or any(b is None for b in block[-2:]):
        return []
    out = []
    if len(block) >= 1 and len(array) >= 1 and block[-1] % 128 and block[-1] != array[-1]:
        out.append(rank - 1)
    if len(block) >= 2 and len(array) >= 2 and block[-2] % 8 and block[-2] != array[-2]:
        out.append(rank - 2)
    return out


# --------------------------------------------------------------------------- places the running program gave


def call_origins(site: Any, reached: Any) -> Mapping[str, Any]:
    """The places the worker read off the pallas_call of ``site`` as it ran (runner/origin_values.py):
    ``{"in_specs[1][0]": [[line, col, end_col], ...], ...}`` ({} when the worker gave none)."""
    if site is None or not reached:
        return {}
    from .reach import site_reached

    for call in reached:
        if call.get("origins") and site_reached(site, [call]):
            return call["origins"]
    return {}


def _ref_key(rec: Mapping[str, Any], site: Any, spec: BlockSpecInfo | None) -> str | None:
    """``in_specs[i]`` / ``out_specs[i]`` of the BlockSpec a lowering error names (None: not said)."""
    if spec is not None:
        return f"{'out_specs' if spec.role == 'out' else 'in_specs'}[{spec.position}]"
    for ref in rec.get("refs") or ():
        if ref.get("kind") not in ("args", "outs"):
            continue
        index = int(ref.get("index", 0))
        prefetch = getattr(site, "num_scalar_prefetch", None)
        if ref.get("kind") == "args" and ref.get("with_prefetch") and isinstance(prefetch, int):
            index -= prefetch
        return f"{'in_specs' if ref.get('kind') == 'args' else 'out_specs'}[{index}]"
    return None


def _literal(place: Any, lines: list[str]) -> str:
    line, col, end = int(place[0]) - 1, int(place[1]), int(place[2])
    return lines[line][col:end] if 0 <= line < len(lines) else ""


def _place_span(place: Any) -> Span:
    return Span(int(place[0]) - 1, int(place[1]), int(place[0]) - 1, int(place[2]))


def pick_place(places: Any, value: int | None, inside: Span | None, lines: list[str]) -> tuple[Any, tuple[Any, ...]] | None:
    """The literal a value most likely got its size from, and the others that made it too: outside
    ``inside`` (the BlockSpec: a number written there is the BlockSpec's own), the one equal to the
    value first, else the largest. None when every place lies inside."""
    outside = [p for p in places or () if inside is None or not (inside.line <= int(p[0]) - 1 <= inside.end_line)]
    if not outside:
        return None

    def number(p: Any) -> float:
        try:
            return float(_literal(p, lines).replace("_", ""))
        except ValueError:
            return 0.0

    best = max(outside, key=lambda p: (value is not None and number(p) == value, number(p), -int(p[0])))
    return best, tuple(p for p in outside if p is not best)


def _carried_sentence(place: Any, others: tuple[Any, ...], lines: list[str]) -> str:
    said = f"{SIZE_SET_HERE} (the number {_literal(place, lines)} written here reached the BlockSpec as the program ran"
    if others:
        said += ", with " + ", ".join(f"{_literal(p, lines)} at line {int(p[0])}" for p in others[:3])
    return said + ")"


def to_carried_origin(code: str, rec: Mapping[str, Any], site: Any, spec: BlockSpecInfo | None, reached: Any,
                      lines: list[str]) -> Moved | None:
    """A block-shape finding placed at the literal(s) the running program says made the bad dim
    (``call_origins``), whatever path the value took to the BlockSpec; the BlockSpec and the other
    literals that made it are related places."""
    if code not in MOVED_CODES:
        return None
    origins = call_origins(site, reached)
    key = _ref_key(rec, site, spec) if origins else None
    if key is None:
        return None
    message = f"{rec.get('message') or ''} {rec.get('sentence') or ''}"
    block = message_block(message)
    if not block:
        return None
    for index in bad_dims(code, message, len(block)):
        picked = pick_place(origins.get(f"{key}[{index}]"), block[index], spec.span if spec is not None else None, lines)
        if picked is None:
            continue
        place, others = picked
        related: list[Related] = []
        if spec is not None:
            related.append(Related(spec.span, "the BlockSpec that uses this value"))
        related.extend(Related(_place_span(p), "this number made the value too") for p in others[:3])
        return Moved(span=_place_span(place), related=tuple(related), sentence=_carried_sentence(place, others, lines))
    return None


def to_library_origin(code: str, rec: Mapping[str, Any], reached: Any, lines: list[str]) -> Moved | None:
    """A block-shape error in a pallas_call the file does not write (a library kernel it calls, e.g.
    jax's megablox ``gmm(..., tiling=(tm, tk, tn))``): at the literal of the file that made the bad
    dim, as the locating run saw it reach the library's BlockSpec (``ReachedCall.origins``). The
    block is the one buffer of the reached calls whose shape is the message's; the file's line that
    calls into the library is related."""
    if code not in MOVED_CODES or not reached:
        return None
    message = f"{rec.get('message') or ''} {rec.get('sentence') or ''}"
    block = message_block(message)
    if not block:
        return None
    found = [(call, b) for call in reached if call.get("origins") for b in call.get("buffers") or ()
             if list(b.get("shape") or ()) == block and b.get("role") in ("in_specs", "out_specs")]
    if len(found) != 1:
        return None  # no block, or several of that shape: which one is not known
    call, buffer = found[0]
    for index in bad_dims(code, message, len(block)):
        picked = pick_place(call["origins"].get(f"{buffer['role']}[{buffer['index']}][{index}]"), block[index], None, lines)
        if picked is None:
            continue
        place, others = picked
        related = [Related(_line_of(int(line) - 1, lines), f"the call into the library kernel {call.get('kernel')} "
                                                           "that builds the BlockSpec from it")
                   for line in (call.get("lines") or ())[:1] if 0 < int(line) <= len(lines)]
        related.extend(Related(_place_span(p), "this number made the value too") for p in others[:3])
        said = (f"{SIZE_SET_HERE} (the number {_literal(place, lines)} written here reached "
                f"{buffer['role']}[{buffer['index']}] of {call.get('kernel')} as the program ran)")
        return Moved(span=_place_span(place), related=tuple(related), sentence=said)
    return None


def to_origin(code: str, rec: Mapping[str, Any], spec: BlockSpecInfo | None, text: str, lines: list[str], *,
              site: Any = None, reached: Any = None) -> Moved | None:
    """Where a block-shape finding on ``spec`` belongs, when the bad dim was written elsewhere: where
    the running program says it was written (``to_carried_origin``), else where tier 0's static
    tracer follows it (``analysis/origins.py``)."""
    carried = to_carried_origin(code, rec, site, spec, reached, lines)
    static = _static_origin(code, rec, spec, text, lines)
    if carried is not None and static is not None and static.span.line == carried.span.line:
        # the same line both ways: the tracer's words say what was written there (a dict entry, a field)
        return Moved(span=carried.span, related=carried.related, sentence=static.sentence)
    return carried if carried is not None else static


def _static_origin(code: str, rec: Mapping[str, Any], spec: BlockSpecInfo | None, text: str,
                   lines: list[str]) -> Moved | None:
    if code not in MOVED_CODES or spec is None:
        return None
    message = f"{rec.get('message') or ''} {rec.get('sentence') or ''}"
    if not spec.dim_spans:
        return _to_branch_origin(code, message, spec, text, lines)
    block = message_block(message)
    for index in bad_dims(code, message, len(spec.dim_spans)):
        if not (0 <= index < len(spec.dim_spans)):
            continue
        origin = trace(text, spec.dim_spans[index])
        if origin is None or origin.kind == "expression" or spec.span.line <= origin.line <= spec.span.end_line:
            continue  # written in the BlockSpec itself, or computed: the BlockSpec is the place
        if origin.chosen and block and index < len(block) and origin.value != block[index]:
            continue  # min()/max() chose another value than this one
        return Moved(span=_line(origin, lines), related=(Related(spec.span, "the BlockSpec that uses this value"),),
                     sentence=_said(origin))
    return None


def _to_branch_origin(code: str, message: str, spec: BlockSpecInfo, text: str, lines: list[str]) -> Moved | None:
    """A BlockSpec chosen under a branch (tier 0 cannot say which one the pallas_call got): the
    branch whose bad dim traces to the very value the message names, when exactly one place does."""
    block = message_block(message)
    if not block:
        return None
    tree = parse(text)
    found: dict[int, tuple[Origin, ast.Call]] = {}
    for call, dims in branch_block_shapes(text, spec.span):
        if len(dims) != len(block) or tree is None:
            continue
        for index in bad_dims(code, message, len(dims)):
            origin = trace_node(tree, text, dims[index])
            if origin is None or origin.kind == "expression" or origin.value != block[index] \
                    or call.lineno - 1 <= origin.line <= call.end_lineno - 1:
                continue
            found.setdefault(origin.line, (origin, call))
    if len(found) != 1:
        return None
    origin, call = next(iter(found.values()))
    return Moved(span=_line(origin, lines),
                 related=(Related(_line_of(call.lineno - 1, lines), "the BlockSpec that uses this value"),
                          Related(spec.span, "where the pallas_call takes that BlockSpec")),
                 sentence=_said(origin))


def _line_of(line: int, lines: list[str]) -> Span:
    text = lines[line] if 0 <= line < len(lines) else ""
    return Span(line, len(text) - len(text.lstrip()), line, len(text.rstrip()))


_STORE_DTYPES = re.compile(r"Invalid dtype for `(?:swap|store)`\. Ref dtype: (?P<ref>\w+)\. Value dtype: (?P<value>\w+)")
_STORED_REF = re.compile(r"^\s*(?P<name>\w+)\s*\[.*\]\s*(?:[-+*/]?=)(?!=)(?P<value>.*)$")
_STORED_FIELD = re.compile(r"^\s*(?P<ref>\w+\.(?P<field>\w+))\s*\[.*\]\s*(?:[-+*/]?=)(?!=)")


def _dtype_kind(name: str) -> str:
    return "f" if "float" in name else "b" if name == "bool" else "c" if "complex" in name else "i"


def made_dtype(site: Any, reached: Any, index: int, text: str) -> Any:
    """Where output ``index``'s dtype is written, from the ``jax.ShapeDtypeStruct(...)`` expression the
    running program made it with (``ReachedCall.origins["out_shape[i].made"]``), whatever path the
    struct took to the pallas_call: its ``Origin`` or None."""
    made = call_origins(site, reached).get(f"out_shape[{index}].made")
    if not made:
        return None
    line, col, end_line, end_col = (int(n) for n in made[0])
    tree = parse(text)
    if tree is None:
        return None
    for node in ast_units.index_of(tree).expressions_at(line - 1, col):  # the expressions starting there
        if isinstance(node, ast.Call):
            dtype = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "dtype"), None)
            if dtype is None:
                return None
            what = ast.get_source_segment(text, dtype) or "the dtype"
            return Origin(dtype.lineno - 1, dtype.col_offset, dtype.end_lineno - 1, dtype.end_col_offset, "expression",
                          f"jax.ShapeDtypeStruct(..., {what}) made here reached the pallas_call as out_shape[{index}]")
    return None


_WRONG_DTYPE = re.compile(r"output \d+ is (?P<dtype>\w+) but the reference returns")


def declaring_site(rec: Mapping[str, Any], site: Any, sites: Sequence[Any], reached: Any) -> tuple[Any, int] | None:
    """Tier 3's output of the wrong dtype when the task makes several pallas_calls: the one call of the file whose
    recorded outputs include that dtype, and the output's index; None when not exactly one does."""
    from .reach import site_reached

    m = _WRONG_DTYPE.search(str(rec.get("message") or ""))
    if m is None or not reached:
        return None
    found = []
    for other in sites:
        calls = [c for c in reached if c.get("buffers") and site_reached(other, [c])]
        outs = {int(b["index"]) for c in calls for b in c["buffers"]
                if b.get("role") == "out_specs" and b.get("dtype") == m.group("dtype")}
        found += [(other, i) for i in sorted(outs)]
    return found[0] if len(found) == 1 else None


def to_output_dtype(code: str, rec: Mapping[str, Any], site: Any, span: Span, text: str, lines: list[str], *,
                    reached: Any = None, sites: Sequence[Any] = ()) -> Moved | None:
    """A wrong ``out_shape`` dtype, said at the dtype (``analysis/call_values.py``) rather than where
    it shows: tier 3's output of another kind of dtype than the reference's (``out_dtype`` ref), or
    a store the lowering rejects because the kernel computes floats where ``out_shape`` declared
    integers (or the other way round) and the store casts nothing (an explicit ``.astype`` at the
    store is the store's own choice: the finding stays there)."""
    if site is None:
        return None
    index = next((int(r["index"]) for r in rec.get("refs") or () if r.get("kind") == "out_dtype"), None)
    if index is not None and (other := declaring_site(rec, site, sites, reached)) is not None:
        site, index = other  # the task's wrong output came from another of its pallas_calls
    store: Related | None = None
    alias: tuple[Span, int, str] | None = None
    if index is None and code == "PLS104":
        m = _STORE_DTYPES.search(f"{rec.get('message') or ''} {rec.get('sentence') or ''}")
        line = lines[span.line] if 0 <= span.line < len(lines) else ""
        stored = _STORED_REF.match(line)
        if not m or "=" not in line:
            return None
        # the output is an input's buffer (input_output_aliases) of the very dtype the kernel stores:
        # out_shape disagrees with the buffer it names, whatever the store does
        alias = _aliased_input(site, stored.group("name") if stored else None, m.group("value"), text, reached)
        if alias is None and (_dtype_kind(m.group("ref")) == _dtype_kind(m.group("value")) or ".astype(" in line):
            # floats into floats, or an explicit cast: the declaration is the place only when it is the odd one
            return _store_or_declaration(site, stored.group("name") if stored else None, m, span, text, lines, reached)
        index = _output_index(site, stored.group("name")) if stored else None
        if index is None:  # the outputs the running program made (ReachedCall.origins)
            index = _made_output_index(site, stored.group("name") if stored else None, reached)
        field = _STORED_FIELD.match(line)  # ``outputs.sum_exp_ref[...] = ...``: a struct of outputs, by field
        if index is None and field and (origin := output_dtype(text, site.span, 0, field.group("field"))) is not None:
            where = Related(span, f"the kernel stores {m.group('value')} values into {field.group('ref')} "
                                  f"({m.group('ref')}) here")
            return Moved(span=_line(origin, lines), related=(where,),
                         sentence=f"output {field.group('field')}'s dtype is set here, in the pallas_call's out_shape "
                                  f"({origin.what})")
        if index is None:  # the kernel's parameters cannot be matched: the one output declared that dtype
            declared = [i for i in range(16) if (o := output_dtype(text, site.span, i)) is not None
                        and m.group("ref") in o.what]
            index = declared[0] if len(declared) == 1 else None
        into = stored.group("name") if stored else "an output"
        store = Related(span, f"the kernel stores {m.group('value')} values into {into} ({m.group('ref')}) here")
    if index is None:
        return None
    origin = _dtype_origin(site, index, text, reached)
    if origin is None:
        return None
    where = Related(span, "where the wrong dtype shows") if store is None else store
    if alias is not None:  # the alias entry joins two buffers of different dtypes: said there (issue 50)
        aliased, input_index, dtype = alias
        return Moved(span=aliased, related=(Related(_line(origin, lines), f"output {index}'s dtype is set here "
                                                                          f"({origin.what})"), where),
                     sentence=f"input {input_index} ({dtype}) is aliased to output {index} here "
                              f"(input_output_aliases), but output {index} is declared another dtype: an alias "
                              "shares one buffer, so both must have the same dtype")
    return Moved(span=_line(origin, lines), related=(where,),
                 sentence=f"output {index}'s dtype is set here, in the pallas_call's out_shape ({origin.what})")


def _dtype_origin(site: Any, index: int, text: str, reached: Any) -> Origin | None:
    """Where output ``index``'s dtype is written: tier 0 follows it from the pallas_call (through a
    constant); where it cannot (a struct made by a helper and passed on), the running program says
    where the struct was made."""
    origin = output_dtype(text, site.span, index)
    if origin is None or site.span.line <= origin.line <= site.span.end_line:
        origin = made_dtype(site, reached, index, text) or origin
    return origin


def _store_or_declaration(site: Any, ref: str | None, m: re.Match[str], span: Span, text: str, lines: list[str],
                          reached: Any) -> Moved | None:
    """A float stored into a float ref of another width (or an explicit cast the ref does not take):
    at the declaration when it is the odd one out, else at the store with the declaration related
    (engine/findings/store_dtype.py)."""
    if ref is None:
        return None

    def output_place(i: int) -> Span | None:
        origin = _dtype_origin(site, i, text, reached)
        return _line(origin, lines) if origin is not None else None

    found = store_declaration(site, ref, m.group("ref"), m.group("value"), span, reached, output_place)
    return Moved(span=found[0], related=found[1], sentence=found[2]) if found is not None else None


def _aliased_input(site: Any, ref: str | None, stored: str, text: str, reached: Any) -> tuple[Span, int, str] | None:
    """When the output ``ref`` of ``site`` is aliased to an input (``input_output_aliases={j: i}``
    written as a dict literal in the pallas_call) whose block the running program saw in the dtype
    ``stored``: (the alias entry's span, j, that dtype); else None."""
    index = _output_index(site, ref) if ref else None
    if index is None:
        return None
    for j, i, entry in alias_entries(site, text):
        if i != index or j is None:
            continue
        from .reach import site_reached

        calls = [c for c in reached or () if c.get("buffers") and site_reached(site, [c])]
        dtype = next((b["dtype"] for c in calls[:1] for b in c["buffers"]
                      if b["role"] == "in_specs" and int(b["index"]) == j - int(getattr(site, "num_scalar_prefetch", 0) or 0)), None)
        if dtype == stored:
            return entry, j, dtype
    return None


def alias_entries(site: Any, text: str) -> list[tuple[int, int, Span]]:
    """(input, output, span) of each ``j: i`` entry of the ``input_output_aliases`` dict literal written
    in ``site``'s pallas_call (or bound once to a name in the file); [] when it is not written out. The
    input is None where it is an expression (``6 + n_b: 1``), the output a constant."""
    tree = parse(text)
    if site is None or tree is None:
        return []
    for node in ast_units.index_of(tree).expressions_at(site.span.line, site.span.column):
        if not isinstance(node, ast.Call):
            continue
        aliases = next((k.value for k in node.keywords if k.arg == "input_output_aliases"), None)
        if aliases is None:
            continue  # the call that applies the pallas_call's function, or another one starting here
        if isinstance(aliases, ast.Name):
            bound = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and len(n.targets) == 1
                     and isinstance(n.targets[0], ast.Name) and n.targets[0].id == aliases.id]
            aliases = bound[0] if len(bound) == 1 else None
        if not isinstance(aliases, ast.Dict):
            return []
        return [(key.value if isinstance(key, ast.Constant) and isinstance(key.value, int) else None, value.value,
                 Span(key.lineno - 1, key.col_offset, value.end_lineno - 1, value.end_col_offset))
                for key, value in zip(aliases.keys, aliases.values)
                if key is not None and isinstance(value, ast.Constant) and isinstance(value.value, int)]
    return []


_ALIAS_MISMATCH = re.compile(r"input_output_aliases contains the mapping '(?P<i>\d+):(?P<o>\d+)' referring to input"
                             r"(?P<path>\S*) with abstract value (?P<a>\S+) and to output(?:\[\d+\])? with a different "
                             r"abstract value (?P<b>[^\s.]+)")


def to_alias_entry(code: str, rec: Mapping[str, Any], site: Any, text: str, lines: list[str], *,
                   reached: Any = None) -> Moved | None:
    """An ``input_output_aliases`` entry between arrays of different shape or dtype (jax's ValueError
    while tracing, at the pallas_call): of the same shape, at the output's dtype where it is written (the
    declaration is the odd one: the alias names the right buffer), with the entry related; else at the entry,
    with the output's dtype related."""
    m = _ALIAS_MISMATCH.search(f"{rec.get('message') or ''} {rec.get('sentence') or ''}")
    if code != "PLS117" or m is None or site is None:
        return None
    j, i = int(m.group("i")), int(m.group("o"))
    entries = alias_entries(site, text)
    entry = next((span for a, b, span in entries if (a, b) == (j, i)), None)
    if entry is None:  # an input written as an expression: the one entry aliasing output i (an output has one)
        unread = [span for a, b, span in entries if a is None and b == i]
        entry = unread[0] if len(unread) == 1 and not any(a is not None and b == i for a, b, _ in entries) else None
    if entry is None:
        return None
    origin = _dtype_origin(site, i, text, reached)
    a, b = m.group("a"), m.group("b")
    if origin is not None and _dims(a) == _dims(b):  # the right buffer, declared with another dtype (issue 57)
        return Moved(span=_line(origin, lines), related=(Related(entry, f"input {j} is aliased to output {i} here"),),
                     sentence=f"output {i} is declared {b} but aliased to input {j} ({a}): an alias shares one "
                              "buffer, so declare the output with the input's dtype")
    related = (Related(_line(origin, lines), f"output {i} is declared here ({b})"),) if origin else ()
    return Moved(span=entry, related=related,
                 sentence=f"input {j} ({a}) and output {i} ({b}) are aliased here: an alias "
                          "shares one buffer, so both must have the same shape and dtype")


def _dims(abstract: str) -> str:
    """The shape part of an abstract value as jax writes it (``float32[64,128]`` -> ``[64,128]``)."""
    return abstract[abstract.find("["):] if "[" in abstract else ""


def _made_output_index(site: Any, ref: str | None, reached: Any) -> int | None:
    """Which output the kernel parameter ``ref`` is, counted against the outputs whose
    ``ShapeDtypeStruct`` the running program saw made (the only one, when ``ref`` cannot be placed)."""
    made = sorted(int(k[len("out_shape["):-len("].made")]) for k in call_origins(site, reached)
                  if k.startswith("out_shape[") and k.endswith("].made"))
    if not made:
        return None
    params, operands = tuple(site.kernel_params or ()), getattr(site, "operands", None)
    if ref in params and operands is not None and (params.index(ref) - len(operands)) in made:
        return params.index(ref) - len(operands)
    return made[0] if len(made) == 1 else None


def _output_index(site: Any, ref: str) -> int | None:
    """Which output of ``site`` the kernel parameter ``ref`` is (None when the layout is unknown)."""
    params = tuple(site.kernel_params or ())
    if ref not in params or site.operands is None or site.out_shape_count is None:
        return None
    index = params.index(ref) - len(site.operands)
    return index if 0 <= index < site.out_shape_count else None


CHECKED_CODES = ("PLS100", "PLS200")  # errors with no place of their own: a failed check, a library's raise


def to_checked_value(code: str, rec: Mapping[str, Any], text: str, lines: list[str], kernel_spans: list[Span]) -> Moved | None:
    """Where an error raised by a check (in the user's code, or in a library the user called) belongs:
    at the value the check rejected, when it was written elsewhere (``analysis/check_values.py``).
    Errors raised inside a kernel body are about the kernel's code and stay there, except a bare
    ``assert`` on a ref's shape whose odd dim was written once outside kernels (``shape_culprit``)."""
    if code not in CHECKED_CODES:
        return None
    frames = tuple((int(f["line"]), str(f.get("function") or "")) for f in rec.get("frames") or ())
    if not frames:
        return None
    carried = to_carried_check(rec, frames, lines)
    static = _static_check(code, rec, frames, text, lines, kernel_spans)
    if carried is not None and static is not None and static.span.line == carried.span.line:
        # the same line both ways: the tracer's words say what was written there (a dict entry, a field)
        return Moved(span=carried.span, related=carried.related, sentence=static.sentence)
    return carried if carried is not None else static


def _static_check(code: str, rec: Mapping[str, Any], frames: tuple[tuple[int, str], ...], text: str, lines: list[str],
                  kernel_spans: list[Span]) -> Moved | None:
    kernels = tuple((k.line, k.end_line) for k in kernel_spans)
    if any(a <= frames[-1][0] - 1 <= b for a, b in kernels):
        # raised inside a kernel: only a bare assert about a ref's shape, whose values the worker
        # recorded, is about a value written elsewhere (the ref's declared block or scratch shape)
        values = (rec.get("raised_at") or {}).get("values")
        found = shape_culprit(text, frames, values, kernels) if values else None
    else:
        message = f"{rec.get('message') or ''} {rec.get('sentence') or ''}"
        found = culprit(text, frames, message, kernels)
    if found is None:
        return None
    check = found.check_line
    check_span = Span(check, 0, check, len(lines[check]) if 0 <= check < len(lines) else 0)
    return Moved(span=_line(found.origin, lines),
                 related=(Related(check_span, f"the check that rejected {found.name} = {found.origin.value}"),),
                 sentence=f"{found.name} is set here ({_KINDS.get(found.origin.kind, found.origin.kind)}: {found.origin.what})")


def _line(origin: Origin, lines: list[str]) -> Span:
    if origin.line == origin.end_line:
        return origin.span
    text = lines[origin.line] if 0 <= origin.line < len(lines) else ""
    return Span(origin.line, len(text) - len(text.lstrip()), origin.line, len(text.rstrip()))


_KINDS = {"dict entry": "a dict entry", "dataclass field": "a dataclass field default",
          "keyword default": "a keyword default", "constant": "a module constant", "local": "a local assignment",
          "argument": "the argument passed here", "list entry": "a list entry", "literal": "a literal"}


SIZE_SET_HERE = "the block size is set here"


def _said(origin: Origin) -> str:
    return f"{SIZE_SET_HERE} ({_KINDS.get(origin.kind, origin.kind)}: {origin.what})"


def buffer_place(site: Any, role: str, index: int, text: str, lines: list[str], *,
                 origins: Mapping[str, Any] | None = None, shape: Any = None) -> tuple[Span, tuple[Related, ...], str] | None:
    """Where the block of ``role[index]`` (``in_specs``/``out_specs``/``scratch_shapes``) of ``site``
    gets its size: the literal that made its largest dim as the program ran (``origins``, with the
    block's ``shape``), else the origin of its largest traceable dim when written outside the
    BlockSpec, else the BlockSpec itself; with the BlockSpec related and a sentence naming the
    origin ("" if none)."""
    carried = _carried_buffer_place(site, role, index, lines, origins, shape)
    if carried is not None:
        return carried
    if role == "scratch_shapes":
        buffers = tuple(getattr(site, "scratch_shapes", None) or ())
        if not (0 <= index < len(buffers)):
            return None
        return buffers[index].span, (), ""
    specs = tuple(getattr(site, role, None) or ())
    spec = next((s for s in specs if s.position == index), specs[index] if 0 <= index < len(specs) else None)
    if spec is None:
        return None
    whole = _untiled_dim(spec, shape, text, lines)
    if whole is not None:
        return whole
    best = None
    for dim_span in spec.dim_spans:
        origin = trace(text, dim_span)
        if origin is None or origin.kind == "expression" or spec.span.line <= origin.line <= spec.span.end_line:
            continue
        if best is None or (isinstance(origin.value, int) and isinstance(best.value, int) and origin.value > best.value):
            best = origin
    if best is None:
        return spec.span, (), ""
    return _line(best, lines), (Related(spec.span, "the BlockSpec of the largest block"),), _said(best)


def _largest_dims(shape: Any) -> list[tuple[int, int]]:
    """(index, size) of the block's largest dims (ties kept): what makes it big."""
    dims = [(d, size) for d, size in enumerate(shape or ()) if isinstance(size, int)]
    top = max((size for _, size in dims), default=None)
    return [(d, size) for d, size in dims if size == top]


def _untiled_dim(spec: BlockSpecInfo, shape: Any, text: str, lines: list[str]) -> tuple[Span, tuple[Related, ...], str] | None:
    """A block whose largest dim traces to no number written anywhere (it is computed from the
    arrays' shapes, e.g. ``BlockSpec((k, bn), ...)`` with ``m, k = x.shape``: the block keeps that
    dim whole): the place is that dim in the BlockSpec, not a smaller dim's literal."""
    largest = _largest_dims(shape)
    if len(largest) != 1 or len(spec.dim_spans) != len(shape or ()):
        return None
    d, size = largest[0]
    origin = trace(text, spec.dim_spans[d])
    if origin is not None and origin.kind != "expression" and isinstance(origin.value, int):
        return None  # written somewhere: the usual place
    written = ast_segment(lines, spec.dim_spans[d])
    return (spec.dim_spans[d], (Related(spec.span, "the block it sizes"),),
            f"{SIZE_SET_HERE} ({written} = {size}: this BlockSpec keeps dim {d} whole, computed from the arrays' "
            f"shapes rather than tiled by a block size)")


def ast_segment(lines: list[str], span: Span) -> str:
    if span.line != span.end_line or not (0 <= span.line < len(lines)):
        return "this dim"
    return lines[span.line][span.column:span.end_column] or "this dim"


def _carried_buffer_place(site: Any, role: str, index: int, lines: list[str], origins: Mapping[str, Any] | None,
                         shape: Any) -> tuple[Span, tuple[Related, ...], str] | None:
    if not origins or not shape:
        return None
    dims = _largest_dims(shape)  # a smaller dim's literal is not what makes the block big
    own = _buffer_span(site, role, index)
    for d, size in dims:
        picked = pick_place(origins.get(f"{role}[{index}][{d}]"), size, own, lines)
        if picked is None:
            continue
        place, others = picked
        said = f"{SIZE_SET_HERE} (the number {_literal(place, lines)} written here made its dim {d} as the program ran)"
        return _place_span(place), ((Related(own, "the block it sizes"),) if own is not None else ()), said
    return None


def _buffer_span(site: Any, role: str, index: int) -> Span | None:
    if site is None:
        return None
    if role == "scratch_shapes":
        buffers = tuple(getattr(site, "scratch_shapes", None) or ())
        return buffers[index].span if 0 <= index < len(buffers) else None
    specs = tuple(getattr(site, role, None) or ())
    spec = next((s for s in specs if s.position == index), None)
    return spec.span if spec is not None else None


def largest_static_block(site: Any, text: str, lines: list[str]) -> tuple[Related, ...]:
    """Without the worker's record of the call's buffers: the block with the most elements whose dims
    tier 0 reads (or traces to literals), at the line that set its size (() when none is known)."""
    if site is None:
        return ()
    best: tuple[int, str, int] | None = None
    for role, specs in (("in_specs", site.in_specs), ("out_specs", site.out_specs)):
        for spec in specs or ():
            dims = static_dims(text, spec)
            if dims and (best is None or math.prod(dims) > best[0]):
                best = (math.prod(dims), role, spec.position)
    if best is None:
        return ()
    place = buffer_place(site, best[1], best[2], text, lines)
    if place is None or not place[2]:
        return ()
    return (Related(place[0], f"{best[1]}[{best[2]}] is the largest block; {place[2]}"),)


def vmem_related(site: Any, reached: Any, text: str, lines: list[str]) -> tuple[Related, ...]:
    """For a VMEM overflow at ``site``: its two largest buffers (from the worker's record of the call,
    runner/reach.py) as related places, each at the line that set its size, saying how big it is."""
    if site is None or not reached:
        return ()
    from .reach import site_reached

    calls = [c for c in reached if site_reached(site, [c]) and c.get("buffers")]
    if not calls:
        return ()
    buffers = sorted(calls[0]["buffers"], key=lambda b: -b["bytes"] * b["buffers"])[:2]
    origins = calls[0].get("origins") or {}
    out = []
    for b in buffers:
        place = buffer_place(site, b["role"], int(b["index"]), text, lines, origins=origins, shape=b.get("shape"))
        if place is None:
            continue
        span, _, said = place
        shape = "(" + ", ".join("None" if d is None else str(d) for d in b["shape"]) + ")"
        times = " x2 (double-buffered)" if b["buffers"] == 2 else ""
        out.append(Related(span, f"{b['role']}[{b['index']}] block {shape} {b['dtype']}: {b['bytes'] / 2**20:.1f} MiB{times}"
                                 + (f"; {said}" if said else "")))
    return tuple(out)


def to_carried_check(rec: Mapping[str, Any], frames: tuple[tuple[int, str], ...], lines: list[str]) -> Moved | None:
    """A check of the file's own code that raised (``if bkv % bkv_compute: raise ...``), placed at
    the literal that made the value it rejected, as the worker's locating run read the check's
    values (``ErrorRecord.checked``, runner/carried_pass.py): of the values the check read, the one
    that breaks the (8, 128) tiling, else the one its message names first; the check and the literals
    that made the other values it compared are related places."""
    checked = [c for c in rec.get("checked") or () if c.get("places")]
    if not checked:
        return None
    check_line = frames[-1][0] - 1
    message = f"{rec.get('message') or ''} {rec.get('sentence') or ''}"
    said_at = {}  # value -> where the message first says it (the check's subject comes first)
    for m in re.finditer(r"(?<![\w.])-?\d+(?!\w|\.\d)", message):
        said_at.setdefault(int(m.group()), m.start())

    def outside(c: Mapping[str, Any]) -> list[Any]:  # a literal written in the check itself is the check's own
        return [p for p in c["places"] if int(p[0]) - 1 != check_line]

    scored = [((odd(int(c["value"])), int(c["value"]) in said_at, -said_at.get(int(c["value"]), len(message)), -i), c)
              for i, c in enumerate(checked) if outside(c)]
    scored = [(score, c) for score, c in scored if score[0] or score[1]]
    if not scored:
        return None
    _, best = max(scored, key=lambda sc: sc[0])
    picked = pick_place(outside(best), int(best["value"]), None, lines)
    if picked is None:
        return None
    place, others = picked
    check_span = Span(check_line, 0, check_line, len(lines[check_line]) if 0 <= check_line < len(lines) else 0)
    related = [Related(check_span, f"the check that rejected {best['name']} = {best['value']}")]
    related.extend(Related(_place_span(p), f"this number made {best['name']} too") for p in others[:3])
    for other in checked:
        if other is best:
            continue
        mine = pick_place(outside(other), int(other["value"]), None, lines)
        if mine is not None:
            related.append(Related(_place_span(mine[0]), f"{other['name']} = {other['value']} is set here and fed the check too"))
    for line, function in reversed(frames[:-1][-3:]):  # the calls the values took to the check
        if 0 <= line - 1 < len(lines):
            related.append(Related(_line_of(line - 1, lines), f"the check in {frames[-1][1]}() is reached through this call"))
    said = (f"{best['name']} is set here (the number {_literal(place, lines)} written here reached the check "
            f"as the program ran)")
    return Moved(span=_place_span(place), related=tuple(related), sentence=said)


_CAPTURES = re.compile(r"The kernel function in the pallas_call \w+ at \S*?:(?P<line>\d+) captures constants")


def to_captured_array(code: str, rec: Mapping[str, Any], text: str, lines: list[str]) -> Moved | None:
    """A kernel that closes over arrays (jax: "The kernel function in the pallas_call k at f.py:12
    captures constants [f32[128]]. You should pass them as inputs."): at the kernel's first use of a
    name it reads from an enclosing function, or from the module, where that name is bound to
    something computed (not a number, string, function, class or import); where the name is bound
    is related. None when the kernel's def is not found or no such name is read."""
    if code != "PLS100":
        return None
    m = _CAPTURES.search(f"{rec.get('message') or ''} {rec.get('sentence') or ''}")
    tree = parse(text)
    if m is None or tree is None:
        return None
    line = int(m.group("line"))
    kernel = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and n.lineno <= line <= (n.body[0].lineno if n.body else n.lineno)
                   and any(d.lineno == line for d in [n, *n.decorator_list])), None)
    if kernel is None:
        return None
    outer = [f for f in _scopes_around(tree, kernel)]
    own = {a.arg for a in [*kernel.args.posonlyargs, *kernel.args.args, *kernel.args.kwonlyargs]}
    own |= {a.arg for a in (kernel.args.vararg, kernel.args.kwarg) if a is not None}
    own |= {n.id for n in ast.walk(kernel) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    uses: dict[str, list[ast.Name]] = {}
    for node in ast.walk(kernel):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in own:
            uses.setdefault(node.id, []).append(node)
    captured = []
    for name, found in uses.items():
        binding = next((b for scope in reversed(outer) if (b := _computed_binding(scope, name)) is not None), None)
        if binding is not None:
            captured.append((min(found, key=lambda n: (n.lineno, n.col_offset)), name, binding))
    if not captured:
        return None
    # a name made by jnp/np/jax first (an array for certain), then the kernel's first read
    captured.sort(key=lambda c: (not _array_call(c[2].value), c[0].lineno, c[0].col_offset))
    use, name, binding = captured[0]
    related = [Related(_line_of(b.lineno - 1, lines), f"{n} is made here, outside the kernel: pass it to the pallas_call "
                                                      "as an input (with a BlockSpec) instead")
               for _, n, b in captured]
    related.extend(Related(Span(u.lineno - 1, u.col_offset, u.end_lineno - 1, u.end_col_offset),
                           f"the kernel reads {n}, an array made outside it, here too") for u, n, _ in captured[1:])
    return Moved(span=Span(use.lineno - 1, use.col_offset, use.end_lineno - 1, use.end_col_offset),
                 related=tuple(related),
                 sentence=f"the kernel reads {name} here, an array it closes over (made at line {binding.lineno}); "
                          "a Pallas kernel can only read arrays passed to it as inputs")


def _array_call(value: ast.expr) -> bool:
    root = value.func if isinstance(value, ast.Call) else None
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in ("jnp", "np", "jax", "numpy")


def _scopes_around(tree: ast.Module, node: ast.AST) -> list[ast.AST]:
    """The module and the functions that enclose ``node``, outermost first."""
    chain: list[ast.AST] = [tree]

    def walk(scope: ast.AST) -> bool:
        for child in ast.iter_child_nodes(scope):
            if child is node:
                return True
            if walk(child):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    chain.insert(1, child)
                return True
        return False

    walk(tree)
    return chain


def _computed_binding(scope: ast.AST, name: str) -> ast.stmt | None:
    """The statement of ``scope`` (not of functions inside it) that binds ``name`` to a computed value
    (a call, an operation, a subscript: what may be an array); None when the name is a parameter, a
    number, a string, a function, a class or an import there, or is not bound there."""
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        params = [*scope.args.posonlyargs, *scope.args.args, *scope.args.kwonlyargs, scope.args.vararg, scope.args.kwarg]
        if any(a is not None and a.arg == name for a in params):
            return None
    found = None
    for stmt in _own_statements(scope):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
            return None
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name).split(".")[0] == name for a in stmt.names):
            return None
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found = stmt if isinstance(stmt.value, (ast.Call, ast.BinOp, ast.Subscript)) else None
    return found


def _own_statements(scope: ast.AST):
    body = getattr(scope, "body", [])
    todo = list(body) if isinstance(body, list) else []
    while todo:
        stmt = todo.pop(0)
        yield stmt
        if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                todo.extend(getattr(stmt, part, None) or [])
            for handler in getattr(stmt, "handlers", None) or []:
                todo.extend(handler.body)

"""From the worker's raw error records to findings at the right span of the user's file.

Client side (never imports jax). The worker (``runner/checks.py``) returns, per entry, raw
records built by ``runner/errors.py``; ``engine/findings/classify.py`` gives each its code, origin and
sentence; this module decides where it goes: the most specific culprit the record and tier 0's
view of the source allow — the BlockSpec behind ``args[i]``/``outs[i]`` for a tiling error, the
index_map lambda the message names, the ``dimension_semantics``/``grid``/``in_specs`` keyword of
a multi-line pallas_call, the store line for a shape/dtype mismatch (inside the kernel, or in a
helper the kernel called, with the kernel's calling line related), the kernel's ``def`` for a
signature mismatch, the ``jax_enable_x64`` line for an int64 the setting caused, and the
``pallas_call`` itself for errors with no location (VMEM OOM). The kernel's def and the
pallas_call come along as ``related``; MLIR dumps and the full text go in ``Finding.detail``; the
registry's generic hint is NOT appended (presentation adds it). Requests that failed as a whole
(limits, crashes, a worker that could not start) are ``engine/findings/reply_failures.py``'s part.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ...analysis.codes import CODES
from ...analysis.types import SEVERITIES, BlockSpecInfo, Finding, Fix, KernelSite, Related, Span, TextEdit, to_json
from ...wire.messages import CheckResult

from .figures import shape_cast_sentence
from .grid_step import to_grid_entry, to_grid_entry_from_table
from .odd_declaration import to_short_scratch, to_odd_declaration, to_untileable_block
from .vmem_limit_origin import to_vmem_limit
from .origin_findings import SIZE_SET_HERE, largest_static_block, to_alias_entry, to_captured_array, to_checked_value, to_library_origin, to_origin, to_output_dtype, vmem_related
from .classify import CALL_ARITY, ORIGIN_COMPILER, ORIGIN_LOWERING, ORIGIN_RUNNER, classify, origin, raised_at_text, sentence, x64_rejection

__all__ = [  # what callers read here; classify and the ORIGIN_* names live in engine/findings/classify.py
    "ORIGIN_COMPILER", "ORIGIN_LOWERING", "ORIGIN_RUNNER", "EntryVerdict", "Located", "call_span", "classify",
    "line_span", "locate_record", "locate_result", "related_places", "x64_setting_line",
]


@dataclass(frozen=True)
class EntryVerdict:
    """One task entry's tier states as the worker reported them."""

    name: str
    tiers: Mapping[int, str]
    line: int | None = None  # 1-based def line
    reached: tuple[Mapping[str, Any], ...] | None = None  # the pallas_calls it made (runner/reach.py); None: unknown
    mosaic_calls: int | None = None  # Mosaic kernels in its lowered module (tier 1); None: not lowered


@dataclass(frozen=True)
class Located:
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    verdicts: tuple[EntryVerdict, ...] = ()
    memory: Mapping[str, Any] = field(default_factory=dict)  # entry -> tier-2 memory_analysis bytes
    by_entry: Mapping[str, tuple[Finding, ...]] = field(default_factory=dict)  # entry -> its findings (all tiers)


# --------------------------------------------------------------------------- whole results


def locate_result(result: CheckResult, text: str, analysis: Any, target: str, *, path: str | None = None) -> Located:
    """Every finding, note and verdict in one ``check`` result (protocol v2's typed ``CheckResult``)."""
    findings: list[Finding] = []
    notes: list[str] = []
    verdicts: list[EntryVerdict] = []
    memory: dict[str, Any] = {}
    by_entry: dict[str, tuple[Finding, ...]] = {}
    ran = sorted(result.tiers) or [1]
    first_tier = min([t for t in ran if t in (1, 2, 3)] or [1])
    for tier, why in sorted(result.unavailable.items()):
        notes.append(f"tier {tier} skipped: {why} (PLS906)")  # a note, said once per report
    for record in result.errors:
        findings.append(locate_record(record.as_mapping(), text, analysis, target, tier=record.tier or first_tier))
    for entry in result.entries:
        tiers = {outcome.tier: outcome.display() for outcome in entry.tiers}
        reached = tuple(to_json(call) for call in entry.reached) if entry.reached is not None else None
        verdicts.append(EntryVerdict(name=entry.name, tiers=tiers, line=entry.line, reached=reached,
                                     mosaic_calls=entry.mosaic_calls))
        if entry.memory:
            memory[entry.name] = entry.memory
        notes.extend(entry.notes)  # e.g. tier-3 interpret-mode time
        mine = tuple(_called_from(locate_record(record.as_mapping(), text, analysis, target,
                                                tier=record.tier or first_tier, entry=entry.name, reached=reached,
                                                from_caller=entry.format == "caller"), entry.called_from)
                     for record in entry.errors)
        if any(f.code == "PLS201" for f in mine):  # name the largest buffers, where their sizes are set
            sites = tuple(getattr(analysis, "sites", ()) or ())
            mine = tuple(_with_buffers(f, sites, reached, text) if f.code == "PLS201" else f for f in mine)
        findings.extend(mine)
        by_entry[entry.name] = by_entry.get(entry.name, ()) + mine
    return Located(tuple(findings), tuple(notes), tuple(verdicts), memory, by_entry)


def _called_from(finding: Finding, called_from: tuple[str, int] | None) -> Finding:
    """A finding of an entry checked through a call found in the workspace, with that call related."""
    if called_from is None:
        return finding
    import dataclasses

    file, line = called_from
    place = Related(Span.point(max(0, line - 1)), "the call (elsewhere in the workspace) whose shapes and "
                    "arguments this was checked with", path=file)
    return dataclasses.replace(finding, related=finding.related + (place,))


def _with_buffers(finding: Finding, sites: Sequence[KernelSite], reached: Any, text: str) -> Finding:
    """A VMEM overflow with its largest buffers related; at the line that set the largest block's
    size when that line is not the BlockSpec itself (a dict entry, a constant, a default)."""
    import dataclasses

    site = next((s for s in sites if s.span.line <= finding.span.line <= s.span.end_line), None)
    extra = vmem_related(site, reached, text, text.splitlines()) or largest_static_block(site, text, text.splitlines())
    known = {(r.span, r.message) for r in finding.related}
    extra = tuple(r for r in extra if (r.span, r.message) not in known)
    if not extra:
        return finding
    largest = extra[0]
    if SIZE_SET_HERE in largest.message and site is not None and "vmem_limit_bytes is" not in finding.message:
        said = largest.message.split(SIZE_SET_HERE, 1)[1].strip(" ()")
        return dataclasses.replace(
            finding, span=largest.span, message=f"{finding.message}; the largest block's size is set here ({said})",
            related=(Related(call_span(site), "the pallas_call that runs out of VMEM"),) + extra + tuple(finding.related))
    return dataclasses.replace(finding, related=extra + tuple(finding.related))


# --------------------------------------------------------------------------- one record


def locate_record(
    rec: Mapping[str, Any],
    text: str,
    analysis: Any,
    target: str,
    *,
    tier: int,
    entry: str | None = None,
    reached: Sequence[Mapping[str, Any]] | None = None,
    from_caller: bool = False,
) -> Finding:
    """The finding for one raw error record of ``tier`` (for ``entry``, when known; ``reached``: the
    pallas_calls the entry made, runner/reach.py, which name the call of an error with no location).
    ``from_caller``: the entry's shapes and arguments came from a caller elsewhere in the workspace
    (runner/tasks/tasks_callers.py), so a value this file writes (a keyword default) need not be the one the
    caller passed: a bad block stays at its BlockSpec rather than at a literal of this file."""
    lines = text.splitlines()
    sites = tuple(getattr(analysis, "sites", ()) or ())
    stage = str(rec.get("stage") or "")
    code = classify(rec, tier)
    if code == "PLS110" and _names_an_index_map(rec, text, sites):
        code = "PLS102"  # the function of the arity error is an index_map of the file, not a kernel
    site = _site_for(rec, sites, entry, reached)
    span = _span_for(code, rec, site, sites, lines)
    said = sentence(rec, code)
    if code == "PLS102" and site is not None and CALL_ARITY.search(said):
        said = _arity_sentence(said, site)
    if code == "PLS107" and x64_rejection(rec):
        said = _x64_sentence(said, lines)
    if code == "PLS202":
        said = shape_cast_sentence(said, rec)  # name the shapes of the cast
    related = _noted_places(rec, span, lines) + related_places(site, span, lines)
    called = _helper_call(rec, span, lines, sites)
    if called is not None:
        related = (called,) + related
    moved = _moved(code, rec, site, sites, reached, text, lines, span, from_caller)
    if moved is not None:  # the bad dim was written elsewhere: a dict entry, field, default (engine/findings/origin_findings.py)
        related = moved.related + tuple(r for r in related_places(site, moved.span, lines) if r not in moved.related)
        if site is None:
            related += _library_places(reached)
        span = moved.span
        said = f"{said} — {moved.sentence}"
    elif code in ("PLS101", "PLS204", "PLS112") and site is not None:
        related = _block_size_sources(site, span, analysis, lines) + related
    fix = None
    if code == "PLS201" and site is not None:
        spec = _spec_for_ref(rec, site, "")
        if spec is not None:  # the allocator named the operand whose window does not fit
            related = (Related(spec.span, "the block that does not fit in VMEM (double-buffered)"),) + related
        fix = vmem_limit_fix(rec, site, lines)
    detail = "\n\n".join(p for p in (rec.get("message"), rec.get("detail"), raised_at_text(rec)) if p) or None
    return Finding(
        code=code,
        message=said,
        span=span,
        severity=rec.get("severity") if rec.get("severity") in SEVERITIES else CODES[code].severity,  # tier 3 may soften
        tier=tier,
        related=related,
        detail=detail,
        origin=origin(rec, stage),
        chip=target,
        kernel=(site.kernel_name if site is not None else None),
        fix=fix,
    )


def _moved(code: str, rec: Mapping[str, Any], site: KernelSite | None, sites: Sequence[KernelSite],
           reached: Sequence[Mapping[str, Any]] | None, text: str, lines: list[str], span: Span,
           from_caller: bool) -> Any:
    """Where a finding belongs when the value that caused it was written elsewhere (a declaration, the
    origin of a dim, a grid entry, a limit's number), first that applies; None: it stays at ``span``."""
    if site is None:
        moved = to_library_origin(code, rec, _named_buffers(rec, reached), lines)
    else:
        moved = None if from_caller else to_origin(code, rec, _spec_for_ref(rec, site, ""), text, lines, site=site,
                                                   reached=reached)
    if moved is None:  # a block or scratch dim off the others the kernel combines it with: at that dim
        moved = to_odd_declaration(code, rec, site, reached, lines, span)
    if moved is None:  # a block entry off the TPU's (8, 128) tiling that broke the kernel first: at that entry
        moved = to_untileable_block(code, rec, site, reached, lines, span)
    if moved is None:  # an access past the end of a scratch buffer (a dim 0, or one short): at that dim
        moved = to_short_scratch(code, rec, site, reached, lines, span)
    if moved is None:  # an index map following a grid axis one step past the array: at the grid's entry
        moved = to_grid_entry(code, rec, site, reached, text, span)
    if moved is None:  # a per-step scalar table read one past its end on the last step: at the grid's entry
        moved = to_grid_entry_from_table(code, rec, site, reached, text, span)
    if moved is None:  # a VMEM overflow under a vmem_limit_bytes written too small: at the number that set it
        moved = to_vmem_limit(code, rec, site, reached, lines, call_span(site) if site is not None else None)
    if moved is None:  # a wrong out_shape dtype, said at the dtype
        moved = to_output_dtype(code, rec, site, span, text, lines, reached=reached, sites=sites)
    if moved is None:  # an alias between buffers of different dtypes: at its entry, or at the dtype declared
        moved = to_alias_entry(code, rec, site, text, lines, reached=reached)
    if moved is None:  # a kernel that closes over an array: at its use in the kernel
        moved = to_captured_array(code, rec, text, lines)
    if moved is None:  # a check (of the user's code, or a library's) rejected a value written elsewhere
        moved = to_checked_value(code, rec, text, lines, [s.kernel_def_span for s in sites if s.kernel_def_span])
    return moved


def vmem_limit_fix(rec: Mapping[str, Any], site: KernelSite, lines: Sequence[str]) -> Fix | None:
    """For a VMEM overflow a few percent over its limit whose larger limit tier 2 verified
    (runner/vmem_fit.py): ``vmem_limit_bytes=N`` added to the call's ``CompilerParams(...)``, where the
    call writes one (a call without compiler_params gets the figure in the message only)."""
    near = (rec.get("vmem") or {}).get("near_limit") or {}
    limit, span = near.get("fits_with"), site.compiler_params_span
    if not limit or span is None:
        return None
    text = _span_text(span, lines)
    m = re.fullmatch(r"(?s)(\s*[\w.]*CompilerParams\s*\()(.*)\)\s*", text or "")
    if m is None or "vmem_limit_bytes" in m.group(2):
        return None
    args = m.group(2).rstrip()
    joined = f"{args}{'' if not args or args.endswith(',') else ','} vmem_limit_bytes={limit}" if args else \
        f"vmem_limit_bytes={limit}"
    return Fix(title=f"Set vmem_limit_bytes={limit} ({limit >> 20} MiB, verified by tier 2)",
               edits=(TextEdit(span=span, new_text=f"{m.group(1)}{joined})"),))


def _span_text(span: Span, lines: Sequence[str]) -> str | None:
    if not (0 <= span.line <= span.end_line < len(lines)):
        return None
    if span.line == span.end_line:
        return lines[span.line][span.column:span.end_column]
    return "\n".join([lines[span.line][span.column:], *lines[span.line + 1:span.end_line],
                      lines[span.end_line][:span.end_column]])


# --------------------------------------------------------------------------- which pallas_call


def _site_for(rec: Mapping[str, Any], sites: Sequence[KernelSite], entry: str | None,
              reached: Sequence[Mapping[str, Any]] | None = None) -> KernelSite | None:
    """The pallas_call the record is about: named by its lines, else the entry's, else the only one
    the entry reached (a VMEM overflow names no line of the file)."""
    if not sites:
        return None
    lines = [f["line"] - 1 for f in rec.get("frames") or ()] + [m["line"] - 1 for m in rec.get("mentions") or ()]
    for line in reversed(lines):
        for site in sites:
            for span in (site.kernel_def_span, site.span):
                if span is not None and span.line <= line <= span.end_line:
                    return site
    mine = [s for s in sites if entry and s.enclosing_function == entry]
    if len(mine) >= 1:
        return mine[0]
    if len(sites) == 1:
        return sites[0]
    called = {line - 1 for call in reached or () for line in call.get("lines") or ()}
    ran = [s for s in sites if any(s.span.line <= line <= s.span.end_line for line in called)]
    return ran[0] if len(ran) == 1 else None


# --------------------------------------------------------------------------- which span


def _span_for(code: str, rec: Mapping[str, Any], site: KernelSite | None, sites: Sequence[KernelSite], lines: list[str]) -> Span:
    text = f"{rec.get('sentence') or ''}\n{rec.get('message') or ''}"
    if code == "PLS000" and rec.get("syntax"):
        syn = rec["syntax"]
        line = max((syn.get("line") or 1) - 1, 0)
        col = max((syn.get("column") or 1) - 1, 0)
        return Span(line, col, line, col + 1)
    if rec.get("tier") == 3 and code.startswith("PLS30") and rec.get("mentions"):
        return _mention_span(rec, lines)  # tier 3 names its own places, the finding's first
    if code in ("PLS901", "PLS905"):
        return _frame_span(rec, lines, sites, prefer_kernel=False) or _mention_span(rec, lines) or Span.point(0)
    if code == "PLS115":  # the call that hands the sharded array to the kernel's function is what to wrap
        caller = _kernel_caller_span(rec, lines, sites)
        if caller is not None:
            return caller
    if site is None:
        return _frame_span(rec, lines, sites, prefer_kernel=True) or _mention_span(rec, lines) or Span.point(0)
    if code in ("PLS101", "PLS204", "PLS112"):
        spec = _spec_for_ref(rec, site, text)
        if spec is not None:
            return spec.span
        return _keyword(site, "in_specs") or call_span(site)
    if code in ("PLS102", "PLS106"):
        spec = _spec_on_mention(rec, site)
        if spec is None and code == "PLS102":
            spec = _arity_mismatch(site)
            if spec is not None and spec.index_map_def_span is not None:
                return spec.index_map_def_span  # a function of the file: its parameters are at its def
        if spec is not None:
            return spec.index_map_span or spec.span
        return (_index_map_function(rec, lines) or _mention_span(rec, lines) or _keyword(site, "in_specs")
                or call_span(site))
    if code == "PLS105":
        return site.dimension_semantics_span or _keyword(site, "compiler_params") or call_span(site)
    if code == "PLS109":
        which = "out_specs" if re.search(r"`out_specs`", text) else "in_specs"
        return _keyword(site, which) or call_span(site)
    if code == "PLS113":
        return site.grid_span or _keyword(site, "grid") or call_span(site)
    if code == "PLS110":
        if re.search(r"should return None", text):
            ret = _return_in_kernel(site, lines)
            if ret is not None:
                return ret
        m = CALL_ARITY.search(text)
        if m and site.kernel_def_span is not None and (site.kernel_name or "") in m.group("fn"):
            return _first_line(site.kernel_def_span, lines)
        return _frame_span(rec, lines, sites, prefer_kernel=True, within_kernel_only=True) or (
            _first_line(site.kernel_def_span, lines) if site.kernel_def_span else call_span(site))
    if code == "PLS201":
        return call_span(site)
    if code == "PLS107" and x64_rejection(rec):
        line = x64_setting_line(lines)
        return line_span(line, lines) if line is not None else call_span(site)
    # Everything else: the innermost user line inside a kernel body, else what the message names.
    return (
        _frame_span(rec, lines, sites, prefer_kernel=True, within_kernel_only=True)
        or _mention_in_kernel(rec, lines, sites)
        or _frame_span(rec, lines, sites, prefer_kernel=True)
        or _mention_span(rec, lines)
        or call_span(site)
    )


def _spec_for_ref(rec: Mapping[str, Any], site: KernelSite, text: str) -> BlockSpecInfo | None:
    refs = list(rec.get("refs") or ())
    ins = tuple(site.in_specs or ())
    outs = tuple(site.out_specs or ())
    for ref in refs:
        index = int(ref.get("index", 0))
        pool = ins if ref.get("kind") == "args" else outs
        if ref.get("kind") == "args" and ref.get("with_prefetch") and isinstance(site.num_scalar_prefetch, int):
            index -= site.num_scalar_prefetch  # ``args[2]`` with one prefetched operand is in_specs[1]
        for spec in pool:
            if spec.position == index:
                return spec
        if 0 <= index < len(pool):
            return pool[index]
    if re.search(r"(?:Block spec|block shape) for outputs?|for outputs? ", text) and outs:
        return outs[0]
    return None


def _library_places(reached: Sequence[Mapping[str, Any]] | None) -> tuple[Related, ...]:
    """The library's own ``pallas_call(...)`` lines (another file) of the calls an entry made."""
    places = dict.fromkeys((str(c["site"][0]), int(c["site"][1])) for c in reached or () if c.get("site"))
    return tuple(Related(Span.point(line - 1), f"the library's pallas_call of {os.path.basename(file)}", path=file)
                 for file, line in list(places)[:2])


def _named_buffers(rec: Mapping[str, Any], reached: Sequence[Mapping[str, Any]] | None
                   ) -> Sequence[Mapping[str, Any]] | None:
    """``reached`` with each library call's blocks cut to the one the message names (``args[0]``: its
    first input, after the scalar-prefetch operands), so a block whose shape others share (flash
    attention's q, output and scratch blocks are all (1, 1, block_q, 128)) is still the named one."""
    refs = [r for r in rec.get("refs") or () if r.get("kind") in ("args", "outs")]
    if not reached or len(refs) != 1:
        return reached
    ref = refs[0]
    role = "in_specs" if ref["kind"] == "args" else "out_specs"
    out = []
    for call in reached:
        index = int(ref.get("index", 0))
        if ref["kind"] == "args" and ref.get("with_prefetch"):
            index -= int(call.get("scalar_prefetch") or 0)
        named = [b for b in call.get("buffers") or () if b.get("role") == role and b.get("index") == index]
        out.append({**call, "buffers": named} if named else call)
    return tuple(out)


def _spec_on_mention(rec: Mapping[str, Any], site: KernelSite) -> BlockSpecInfo | None:
    specs = tuple(site.in_specs or ()) + tuple(site.out_specs or ())
    for m in rec.get("mentions") or ():
        line = m["line"] - 1
        for spec in specs:
            im = spec.index_map_span or spec.span
            if im.line <= line <= im.end_line:
                return spec
    return None


def _index_map_function(rec: Mapping[str, Any], lines: list[str]) -> Span | None:
    """An index_map written as a function of the file (not a lambda of a readable BlockSpec): its
    ``def`` line when it takes the wrong number of grid indices (the TypeError names it), the line
    of the tuple it returns when it returns the wrong number of them (the message names its def)."""
    from ...analysis.origins import parse

    tree = parse("\n".join(lines))
    if tree is None:
        return None
    said = f"{rec.get('sentence') or ''} {rec.get('message') or ''}"
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    m = CALL_ARITY.search(said)
    if m:
        name = m.group("fn").rsplit(".", 1)[-1]
        named = [d for d in defs if d.name == name]
        return line_span(named[0].lineno - 1, lines) if len(named) == 1 else None
    if re.search(r"must return \d+ values", said):
        count = re.search(r"Currently returning (\d+)", said)
        for mention in rec.get("mentions") or ():
            fn = next((d for d in defs if d.lineno == mention["line"]), None)
            returns = [r for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None] if fn else []
            if len(returns) > 1 and count:  # several returns: the one returning as many as the message says
                returns = [r for r in returns if isinstance(r.value, ast.Tuple) and len(r.value.elts) == int(count.group(1))
                           and not any(isinstance(e, ast.Starred) for e in r.value.elts)]
            if len(returns) == 1:
                return line_span(returns[0].value.lineno - 1, lines)
    return None


def _names_an_index_map(rec: Mapping[str, Any], text: str, sites: Sequence[KernelSite]) -> bool:
    """Whether the function an arity ``TypeError`` names is an index_map: no kernel's name, and
    passed to a ``BlockSpec`` of the file (its second argument or ``index_map=``, by name, as
    ``self.name`` or through ``functools.partial``). The classifier alone goes by the name
    (``<lambda>``, ``..index_map``); ``x_map`` or ``in_map`` were taken for a kernel's signature."""
    from ...analysis.origins import parse

    m = CALL_ARITY.search(f"{rec.get('sentence') or ''} {rec.get('message') or ''}")
    tree = parse(text)
    if m is None or tree is None:
        return False
    name = m.group("fn").rsplit(".", 1)[-1]
    if name in {s.kernel_name for s in sites}:
        return False
    return name in index_map_names(tree)


def index_map_names(tree: ast.AST) -> set[str]:
    """Names of the functions passed as index_maps to the ``BlockSpec`` calls of ``tree``."""
    out: set[str] = set()

    def add(node: ast.AST | None) -> None:
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "partial" \
                and node.args:
            add(node.args[0])

    bound: dict[str, list[ast.AST]] = {}  # index_map = functools.partial(_row_map, ...) then BlockSpec(..., index_map)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
        if callee != "BlockSpec":
            continue
        given = [node.args[1]] if len(node.args) >= 2 else []
        given += [k.value for k in node.keywords if k.arg == "index_map"]
        for value in given:
            add(value)
            if isinstance(value, ast.Name):
                for assigned in bound.get(value.id, ()):
                    add(assigned)
    return out


def _arity_mismatch(site: KernelSite) -> BlockSpecInfo | None:
    """The BlockSpec whose index_map takes a different number of parameters than the grid has."""
    if site.grid is None:
        return None
    want = len(site.grid) + int(site.num_scalar_prefetch or 0)
    for spec in tuple(site.in_specs or ()) + tuple(site.out_specs or ()):
        if spec.index_map_arity is not None and spec.index_map_arity != want:
            return spec
    return None


def _arity_sentence(said: str, site: KernelSite) -> str:
    """An index_map arity error in the pallas_call's terms: its parameters against the grid's rank."""
    spec = _arity_mismatch(site)
    if spec is None or site.grid is None:
        return said
    return (f"the index_map takes {spec.index_map_arity} parameter(s) but the grid has "
            f"{len(site.grid)} dimension(s) ({said})")


def _return_in_kernel(site: KernelSite, lines: list[str]) -> Span | None:
    span = site.kernel_def_span
    if span is None:
        return None
    for line in range(span.line + 1, min(span.end_line, len(lines) - 1) + 1):
        stripped = lines[line].strip()
        if re.match(r"return\s+\S", stripped) and stripped != "return None":
            return line_span(line, lines)
    return None


def _frame_span(rec, lines, sites, *, prefer_kernel: bool, within_kernel_only: bool = False) -> Span | None:
    """The innermost frame of the user's file on the record's traceback, as a span.

    ``prefer_kernel``: the innermost frame at or below a kernel body, which is in the body itself
    or in a helper function the kernel called (the store written in ``_write(o_ref, v)``);
    ``within_kernel_only``: None when no frame reaches a kernel body.
    """
    frames = list(rec.get("frames") or ())
    if not frames:
        return None
    if prefer_kernel:
        below = _frames_below_kernel(frames, sites)
        if below:
            return _frame_to_span(below[-1], lines)
    if within_kernel_only:
        return None
    return _frame_to_span(frames[-1], lines)


def _kernel_caller_span(rec: Mapping[str, Any], lines: list[str], sites: Sequence[KernelSite]) -> Span | None:
    """The frame that called the function making a pallas_call (``double(x)`` in ``run``): where a
    kernel is applied to a sharded array, and where the shard_map belongs."""
    frames = list(rec.get("frames") or ())
    makers = {s.enclosing_function for s in sites if s.enclosing_function}
    inner = next((i for i in range(len(frames) - 1, -1, -1) if frames[i].get("function") in makers), None)
    if not inner:
        return None
    return _frame_to_span(frames[inner - 1], lines)


def _in_kernel(frame: Mapping[str, Any], sites: Sequence[KernelSite]) -> bool:
    return any(s.kernel_def_span is not None and s.kernel_def_span.line <= frame["line"] - 1 <= s.kernel_def_span.end_line
               for s in sites)


def _frames_below_kernel(frames: Sequence[Mapping[str, Any]], sites: Sequence[KernelSite]) -> list[Mapping[str, Any]]:
    """The frames from the outermost one in a kernel body inward: the kernel's own lines, then the
    helpers it called. Frames at a pallas_call or in the function around one (an outer exception's
    traceback) are not helpers."""
    first = next((i for i, f in enumerate(frames) if _in_kernel(f, sites)), None)
    if first is None:
        return []
    calls = [s.span for s in sites]
    outer = {s.enclosing_function for s in sites if s.enclosing_function} | {"<module>"}
    return [f for f in frames[first:] if _in_kernel(f, sites) or not (
        f.get("function") in outer or any(c.line <= f["line"] - 1 <= c.end_line for c in calls))]


def _helper_call(rec: Mapping[str, Any], span: Span, lines: list[str], sites: Sequence[KernelSite]) -> Related | None:
    """When ``span`` is in a helper the kernel called, the kernel's line that called it."""
    below = _frames_below_kernel(list(rec.get("frames") or ()), sites)
    if not below or _in_kernel(below[-1], sites) or _frame_to_span(below[-1], lines) != span:
        return None
    caller = [f for f in below if _in_kernel(f, sites)][-1]
    helper = next((f for f in below if not _in_kernel(f, sites)), below[-1])
    return Related(_frame_to_span(caller, lines),
                   f"called from the kernel here ({helper.get('function') or 'the helper'} runs inside the kernel)")


def _frame_to_span(frame: Mapping[str, Any], lines: list[str]) -> Span:
    line = frame["line"] - 1
    col, end_col, end_line = frame.get("column"), frame.get("end_column"), frame.get("end_line")
    if col is None or end_col is None or not (0 <= line < len(lines)):
        return line_span(line, lines)
    end_line = (end_line or frame["line"]) - 1
    if not (0 <= end_line < len(lines)):
        return line_span(line, lines)
    return Span(line, _byte_to_cp(lines[line], col), end_line, _byte_to_cp(lines[end_line], end_col))


def _byte_to_cp(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def _mention_span(rec: Mapping[str, Any], lines: list[str]) -> Span | None:
    mentions = list(rec.get("mentions") or ())
    if not mentions:
        return None
    return line_span(mentions[0]["line"] - 1, lines)


def _noted_places(rec: Mapping[str, Any], span: Span, lines: list[str]) -> tuple[Related, ...]:
    """The places a record names with a note (tier 3: the store, the scratch, the read), other than
    the finding's own line, as related places."""
    out = []
    for m in rec.get("mentions") or ():
        if m.get("note") and m["line"] - 1 != span.line:
            out.append(Related(line_span(m["line"] - 1, lines), str(m["note"])))
    return tuple(out)


def _mention_in_kernel(rec, lines, sites) -> Span | None:
    kernels = [s.kernel_def_span for s in sites if s.kernel_def_span is not None]
    for m in rec.get("mentions") or ():
        line = m["line"] - 1
        if any(k.line < line <= k.end_line for k in kernels):  # inside the body, not the def line
            return line_span(line, lines)
    return None


def _keyword(site: KernelSite, name: str) -> Span | None:
    return site.keyword_span(name)


def call_span(site: KernelSite) -> Span:
    return site.call_span or site.span


def _first_line(span: Span, lines: list[str]) -> Span:
    return line_span(span.line, lines)


def line_span(line: int, lines: list[str]) -> Span:
    if not (0 <= line < len(lines)):
        return Span.point(max(line, 0))
    text = lines[line]
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    comment = _comment_start(text)
    if comment is not None and comment > start:
        end = len(text[:comment].rstrip())
    return Span(line, start, line, max(end, start))


def _comment_start(text: str) -> int | None:
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return i
    return None


def related_places(site: KernelSite | None, span: Span, lines: list[str]) -> tuple[Related, ...]:
    if site is None:
        return ()
    out = []
    if site.kernel_def_span is not None and not (site.kernel_def_span.line <= span.line <= site.kernel_def_span.end_line):
        out.append(Related(_first_line(site.kernel_def_span, lines), f"kernel {site.kernel_name or ''} is defined here".replace("  ", " ")))
    call = call_span(site)
    if not (site.span.line <= span.line <= site.span.end_line) or span == call:
        if span != call:
            out.append(Related(call, "the pallas_call"))
    elif span.line != call.line:
        out.append(Related(call, "in this pallas_call"))
    return tuple(out)


def _block_size_sources(site: KernelSite, span: Span, analysis: Any, lines: list[str]) -> tuple[Related, ...]:
    """Where the named block sizes of the blamed BlockSpec are set (a tunable default, a constant)."""
    spec = next((b for b in tuple(site.in_specs or ()) + tuple(site.out_specs or ()) if b.span == span), None)
    if spec is None:
        return ()
    tunables = {t.name: t for task in getattr(analysis, "tasks", ()) or () for t in task.tunables}
    out = []
    for dim in spec.dim_spans:
        if dim.line != dim.end_line or not (0 <= dim.line < len(lines)):
            continue
        name = lines[dim.line][dim.column:dim.end_column].strip()
        if not name.isidentifier():
            continue
        if name in tunables and tunables[name].span is not None:
            out.append(Related(tunables[name].span, f"{name} defaults to {tunables[name].default} here (a tunable)"))
            continue
        for i, line in enumerate(lines):
            m = re.match(rf"{re.escape(name)}\s*(?::[^=]+)?=\s*(.+?)\s*(?:#.*)?$", line)
            if m:
                out.append(Related(line_span(i, lines), f"{name} = {m.group(1)} is set here"))
                break
    return tuple(out)


# --------------------------------------------------------------------------- jax_enable_x64

_X64_SETTING = re.compile(r"""["']jax_enable_x64["']\s*,\s*(?:True|1)\b|\bjax_enable_x64\s*=\s*True\b""")


def x64_setting_line(lines: Sequence[str]) -> int | None:
    """The 0-based line turning jax_enable_x64 on (``jax.config.update("jax_enable_x64", True)``)."""
    for i, line in enumerate(lines):
        code = line[: _comment_start(line)] if _comment_start(line) is not None else line
        if _X64_SETTING.search(code):
            return i
    return None


def _x64_sentence(compiler_said: str, lines: Sequence[str]) -> str:
    line = x64_setting_line(lines)
    where = (f"at line {line + 1}" if line is not None else
             "not in this file: the JAX_ENABLE_X64 environment variable or an imported module turned it on")
    return (f"jax_enable_x64 is on ({where}), so the Python ints of this kernel's index maps and grid are "
            f"traced as int64, which the TPU compiler cannot lower, even for a float32 kernel (it said: "
            f"{compiler_said}). Turn x64 off for this file, or trace the kernel with 32-bit ints by calling "
            f"the pallas_call inside `with jax.enable_x64(False):`.")

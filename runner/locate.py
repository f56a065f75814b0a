"""From the worker's raw error records to findings at the right span of the user's file.

Client side (never imports jax). The worker (``runner/checks.py``) returns, per entry, raw
records built by ``runner/errors.py``; this module decides for each one:

- the code: PLS1xx / PLS2xx by message pattern (``classify``), PLS9xx for import, task and
  worker failures;
- the span: the most specific culprit the record and tier 0's view of the source allow — the
  BlockSpec behind ``args[i]``/``outs[i]`` for a tiling error, the index_map lambda the message
  names, the ``dimension_semantics``/``grid``/``in_specs`` keyword of a multi-line pallas_call,
  the store line inside the kernel for a shape/dtype mismatch, the kernel's ``def`` for a
  signature mismatch, and the ``pallas_call`` itself for errors with no location (VMEM OOM, with
  the bytes requested vs the limit in the message);
- the message: what happened and where, with any specific what-to-do the record allows; the
  registry's generic hint is NOT appended (presentation adds it: the CLI's ``help:`` line, the
  language server's diagnostic); MLIR dumps and the full text go in ``Finding.detail``; the kernel's def and the pallas_call as ``related``;
  ``origin`` says who spoke (jax lowering or the libtpu compiler), ``chip`` the target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pallasite.analysis.codes import CODES
from pallasite.analysis.types import SEVERITIES, BlockSpecInfo, Finding, KernelSite, Related, Span

ORIGIN_LOWERING = "jax lowering"
ORIGIN_COMPILER = "libtpu compiler"
ORIGIN_RUNNER = "pallasite runner"


@dataclass(frozen=True)
class EntryVerdict:
    """One task entry's tier states as the worker reported them."""

    name: str
    tiers: Mapping[int, str]
    line: int | None = None  # 1-based def line


@dataclass(frozen=True)
class Located:
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    verdicts: tuple[EntryVerdict, ...] = ()
    memory: Mapping[str, Any] = field(default_factory=dict)  # entry -> tier-2 memory_analysis bytes
    by_entry: Mapping[str, tuple[Finding, ...]] = field(default_factory=dict)  # entry -> its findings (all tiers)


# --------------------------------------------------------------------------- whole results


def locate_result(result: Mapping[str, Any], text: str, analysis: Any, target: str, *, path: str | None = None) -> Located:
    """Every finding, note and verdict in one ``check`` result."""
    findings: list[Finding] = []
    notes: list[str] = []
    verdicts: list[EntryVerdict] = []
    memory: dict[str, Any] = {}
    by_entry: dict[str, tuple[Finding, ...]] = {}
    ran = sorted(int(t) for t in (result.get("tiers") or ())) or [1]
    first_tier = min([t for t in ran if t in (1, 2, 3)] or [1])
    for tier, why in sorted((result.get("unavailable") or {}).items()):
        notes.append(f"tier {tier} skipped: {why} (PLS906)")  # a note, said once per report
    for rec in result.get("errors") or ():
        findings.append(locate_record(rec, text, analysis, target, tier=int(rec.get("tier") or first_tier)))
    for entry in result.get("entries") or ():
        name = str(entry.get("name"))
        tiers = {int(k): str(v) for k, v in (entry.get("tiers") or {}).items()}
        verdicts.append(EntryVerdict(name=name, tiers=tiers, line=entry.get("line")))
        if entry.get("memory"):
            memory[name] = entry["memory"]
        notes.extend(str(n) for n in entry.get("notes") or ())  # e.g. tier-3 interpret-mode time
        mine = tuple(locate_record(rec, text, analysis, target, tier=int(rec.get("tier") or first_tier), entry=name)
                     for rec in entry.get("errors") or ())
        findings.extend(mine)
        by_entry[name] = by_entry.get(name, ()) + mine
    return Located(tuple(findings), tuple(notes), tuple(verdicts), memory, by_entry)


# --------------------------------------------------------------------------- one record


def locate_record(
    rec: Mapping[str, Any],
    text: str,
    analysis: Any,
    target: str,
    *,
    tier: int,
    entry: str | None = None,
) -> Finding:
    """The finding for one raw error record of ``tier`` (for ``entry``, when known)."""
    lines = text.splitlines()
    sites = tuple(getattr(analysis, "sites", ()) or ())
    stage = str(rec.get("stage") or "")
    code = classify(rec, tier)
    site = _site_for(rec, sites, entry)
    span = _span_for(code, rec, site, sites, lines)
    sentence = _clean_sentence(rec, code, site)
    if code == "PLS107" and _x64_rejection(rec):
        sentence = _x64_sentence(sentence, lines)
    origin = _origin(rec, stage)
    related = _related(site, span, lines)
    called = _helper_call(rec, span, lines, sites)
    if called is not None:
        related = (called,) + related
    if code in ("PLS101", "PLS204", "PLS112") and site is not None:
        related = _block_size_sources(site, span, analysis, lines) + related
    if code == "PLS201" and site is not None:
        spec = _spec_for_ref(rec, site, "")
        if spec is not None:  # the allocator named the operand whose window does not fit
            related = (Related(spec.span, "the block that does not fit in VMEM (double-buffered)"),) + related
    detail = "\n\n".join(p for p in (rec.get("message"), rec.get("detail"), _raised_at_text(rec)) if p) or None
    return Finding(
        code=code,
        message=sentence,
        span=span,
        severity=rec.get("severity") if rec.get("severity") in SEVERITIES else CODES[code].severity,  # tier 3 may soften
        tier=tier,
        related=related,
        detail=detail,
        origin=origin,
        chip=target,
        kernel=(site.kernel_name if site is not None else None),
    )


# Ordered (code for tier 1, code for tier 2, pattern); the first match wins.
_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (c1, c2, re.compile(p, re.I | re.S))
    for c1, c2, p in (
        ("PLS201", "PLS201", r"ran out of memory in memory space vmem|would exceed memory.{0,200}vmem|"
                             r"E1001|ScopedVmemOom|vmem.{0,40}(?:oom|out of memory)|"
                             r"of [\d.]+\s*[KMG]i?B? (?:scoped )?vmem|Exceeded vmem"),
        ("PLS204", "PLS204", r"E2002|MisalignedBlockAndTiling|not divisible by tiling"),
        ("PLS203", "PLS203", r"E2003|UnprovenMemoryAccessAlignment|cannot statically prove"),
        ("PLS202", "PLS202", r"unsupported shape cast|shape_cast|relayout"),
        ("PLS101", "PLS101", r"divisible by 8 and 128|last two dimensions of your block shape"),
        ("PLS112", "PLS112", r"must have the same number of dimensions as the array"),
        ("PLS106", "PLS106", r"must return integer scalars"),
        ("PLS102", "PLS102", r"Index map function .{0,300}must return \d+ values"),
        ("PLS113", "PLS113", r"Grid must be a tuple of integers"),
        ("PLS109", "PLS109", r"Pytree for `(?:in_specs|out_specs)` and `(?:inputs|out_shape)` do not match"),
        ("PLS105", "PLS105", r"dimension.?semantics"),
        ("PLS107", "PLS107", r"64-bit types? (?:are|is) not supported|\bi64\b.{0,80}not supported"),
        ("PLS108", "PLS108", r"load scalars from SMEM|store scalars to VMEM|scalars? (?:to|from|in) (?:VMEM|SMEM)"),
        ("PLS104", "PLS104", r"Invalid (?:shape|dtype) for `(?:swap|get|load|store)`"),
        ("PLS110", "PLS110", r"should return None"),
        ("PLS103", "PLS103", r"Unimplemented primitive|take_along_axis-like gathers|not implemented|"
                             r"NotImplementedError|Unsupported .{0,40}(?:primitive|operation)"),
    )
)

_CALL_ARITY = re.compile(r"(?P<fn>[\w.<>]+)\(\) (?:takes \d+ positional arguments? but \d+ (?:was|were) given|"
                         r"missing \d+ required positional arguments?)")


def classify(rec: Mapping[str, Any], tier: int) -> str:
    """The finding code for a raw record (by stage, exception type and message pattern)."""
    stage = str(rec.get("stage") or "")
    if rec.get("code") in CODES:  # the worker already knew (tier 3 records, runner/interpret.py)
        return str(rec["code"])
    if stage == "import":
        return "PLS000" if rec.get("syntax") else "PLS901"
    if stage == "task":
        return "PLS905"
    text = f"{rec.get('sentence') or ''}\n{rec.get('message') or ''}"
    if rec.get("vmem"):
        return "PLS201"
    if _x64_rejection(rec):
        return "PLS107"
    for c1, c2, pattern in _PATTERNS:
        if pattern.search(text):
            return c1 if tier == 1 else c2
    etype = str(rec.get("type") or "")
    m = _CALL_ARITY.search(text)
    if etype == "TypeError" and m:
        return "PLS102" if "<lambda>" in m.group("fn") or "index_map" in m.group("fn") else "PLS110"
    if etype == "AttributeError" and "has no attribute" in text:
        return "PLS111"
    if _from_compiler(rec):
        return "PLS200"
    return "PLS100"


_I64 = re.compile(r"\bi64\b")
_EXPLICIT_64 = next(p for c1, _, p in _PATTERNS if c1 == "PLS107")
_X64_SETTING = re.compile(r"""["']jax_enable_x64["']\s*,\s*(?:True|1)\b|\bjax_enable_x64\s*=\s*True\b""")


def _x64_rejection(rec: Mapping[str, Any]) -> bool:
    """The compiler choked on an int64 that exists only because jax_enable_x64 was on.

    With x64 on, the Python ints of a kernel's index maps and grid become int64 and Mosaic fails
    (e.g. "failed to legalize operation 'func.return' ... i64") even for a float32 kernel. An
    explicit 64-bit type in the kernel ("64-bit types are not supported") keeps its own location.
    """
    text = f"{rec.get('sentence') or ''}\n{rec.get('message') or ''}"
    return bool(rec.get("x64")) and bool(_I64.search(text)) and not _EXPLICIT_64.search(text)


def x64_setting_line(lines: Sequence[str]) -> int | None:
    """The 0-based line turning jax_enable_x64 on (``jax.config.update("jax_enable_x64", True)``)."""
    for i, line in enumerate(lines):
        code = line[: _comment_start(line)] if _comment_start(line) is not None else line
        if _X64_SETTING.search(code):
            return i
    return None


def _from_compiler(rec: Mapping[str, Any]) -> bool:
    etype = str(rec.get("type") or "")
    return etype in ("MosaicError", "JaxRuntimeError", "XlaRuntimeError") or bool(rec.get("mosaic_codes"))


def _origin(rec: Mapping[str, Any], stage: str) -> str:
    if rec.get("origin"):  # who spoke, when the worker says (e.g. "TPU interpreter")
        return str(rec["origin"])
    if stage in ("import", "task"):
        return ORIGIN_RUNNER
    return ORIGIN_COMPILER if _from_compiler(rec) else ORIGIN_LOWERING


# --------------------------------------------------------------------------- which pallas_call


def _site_for(rec: Mapping[str, Any], sites: Sequence[KernelSite], entry: str | None) -> KernelSite | None:
    """The pallas_call the record is about: named by its lines, else the entry's, else the only one."""
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
    return sites[0] if len(sites) == 1 else None


# --------------------------------------------------------------------------- which span


def _span_for(code: str, rec: Mapping[str, Any], site: KernelSite | None, sites: Sequence[KernelSite], lines: list[str]) -> Span:
    text = f"{rec.get('sentence') or ''}\n{rec.get('message') or ''}"
    if code == "PLS000" and rec.get("syntax"):
        syn = rec["syntax"]
        line = max((syn.get("line") or 1) - 1, 0)
        col = max((syn.get("column") or 1) - 1, 0)
        return Span(line, col, line, col + 1)
    if code in ("PLS901", "PLS905"):
        return _frame_span(rec, lines, sites, prefer_kernel=False) or _mention_span(rec, lines) or Span.point(0)
    if site is None:
        return _frame_span(rec, lines, sites, prefer_kernel=True) or _mention_span(rec, lines) or Span.point(0)
    if code in ("PLS101", "PLS204", "PLS112"):
        spec = _spec_for_ref(rec, site, text)
        if spec is not None:
            return spec.span
        return _keyword(site, "in_specs") or _call(site)
    if code in ("PLS102", "PLS106"):
        spec = _spec_on_mention(rec, site) or (_arity_mismatch(site) if code == "PLS102" else None)
        if spec is not None:
            return spec.index_map_span or spec.span
        return _mention_span(rec, lines) or _keyword(site, "in_specs") or _call(site)
    if code == "PLS105":
        return site.dimension_semantics_span or _keyword(site, "compiler_params") or _call(site)
    if code == "PLS109":
        which = "out_specs" if re.search(r"`out_specs`", text) else "in_specs"
        return _keyword(site, which) or _call(site)
    if code == "PLS113":
        return site.grid_span or _keyword(site, "grid") or _call(site)
    if code == "PLS110":
        if re.search(r"should return None", text):
            ret = _return_in_kernel(site, lines)
            if ret is not None:
                return ret
        m = _CALL_ARITY.search(text)
        if m and site.kernel_def_span is not None and (site.kernel_name or "") in m.group("fn"):
            return _first_line(site.kernel_def_span, lines)
        return _frame_span(rec, lines, sites, prefer_kernel=True, within_kernel_only=True) or (
            _first_line(site.kernel_def_span, lines) if site.kernel_def_span else _call(site))
    if code == "PLS201":
        return _call(site)
    if code == "PLS107" and _x64_rejection(rec):
        line = x64_setting_line(lines)
        return _line_span(line, lines) if line is not None else _call(site)
    # Everything else: the innermost user line inside a kernel body, else what the message names.
    return (
        _frame_span(rec, lines, sites, prefer_kernel=True, within_kernel_only=True)
        or _mention_in_kernel(rec, lines, sites)
        or _frame_span(rec, lines, sites, prefer_kernel=True)
        or _mention_span(rec, lines)
        or _call(site)
    )


def _spec_for_ref(rec: Mapping[str, Any], site: KernelSite, text: str) -> BlockSpecInfo | None:
    refs = list(rec.get("refs") or ())
    ins = tuple(site.in_specs or ())
    outs = tuple(site.out_specs or ())
    for ref in refs:
        index = int(ref.get("index", 0))
        pool = ins if ref.get("kind") == "args" else outs
        for spec in pool:
            if spec.position == index:
                return spec
        if 0 <= index < len(pool):
            return pool[index]
    if re.search(r"(?:Block spec|block shape) for outputs?|for outputs? ", text) and outs:
        return outs[0]
    return None


def _spec_on_mention(rec: Mapping[str, Any], site: KernelSite) -> BlockSpecInfo | None:
    specs = tuple(site.in_specs or ()) + tuple(site.out_specs or ())
    for m in rec.get("mentions") or ():
        line = m["line"] - 1
        for spec in specs:
            im = spec.index_map_span or spec.span
            if im.line <= line <= im.end_line:
                return spec
    return None


def _arity_mismatch(site: KernelSite) -> BlockSpecInfo | None:
    """The BlockSpec whose index_map takes a different number of parameters than the grid has."""
    if site.grid is None:
        return None
    want = len(site.grid) + int(site.num_scalar_prefetch or 0)
    for spec in tuple(site.in_specs or ()) + tuple(site.out_specs or ()):
        if spec.index_map_arity is not None and spec.index_map_arity != want:
            return spec
    return None


def _return_in_kernel(site: KernelSite, lines: list[str]) -> Span | None:
    span = site.kernel_def_span
    if span is None:
        return None
    for line in range(span.line + 1, min(span.end_line, len(lines) - 1) + 1):
        stripped = lines[line].strip()
        if re.match(r"return\s+\S", stripped) and stripped != "return None":
            return _line_span(line, lines)
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


def _in_kernel(frame: Mapping[str, Any], sites: Sequence[KernelSite]) -> bool:
    return any(s.kernel_def_span is not None and s.kernel_def_span.line <= frame["line"] - 1 <= s.kernel_def_span.end_line
               for s in sites)


def _frames_below_kernel(frames: Sequence[Mapping[str, Any]], sites: Sequence[KernelSite]) -> list[Mapping[str, Any]]:
    """The frames from the outermost one in a kernel body inward: the kernel's own lines, then the
    helpers it called. Frames at a pallas_call (an outer exception's traceback) are not helpers."""
    first = next((i for i, f in enumerate(frames) if _in_kernel(f, sites)), None)
    if first is None:
        return []
    calls = [s.span for s in sites]
    return [f for f in frames[first:]
            if _in_kernel(f, sites) or not any(c.line <= f["line"] - 1 <= c.end_line for c in calls)]


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
        return _line_span(line, lines)
    end_line = (end_line or frame["line"]) - 1
    if not (0 <= end_line < len(lines)):
        return _line_span(line, lines)
    return Span(line, _byte_to_cp(lines[line], col), end_line, _byte_to_cp(lines[end_line], end_col))


def _byte_to_cp(line: str, byte_offset: int) -> int:
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def _mention_span(rec: Mapping[str, Any], lines: list[str]) -> Span | None:
    mentions = list(rec.get("mentions") or ())
    if not mentions:
        return None
    return _line_span(mentions[0]["line"] - 1, lines)


def _mention_in_kernel(rec, lines, sites) -> Span | None:
    kernels = [s.kernel_def_span for s in sites if s.kernel_def_span is not None]
    for m in rec.get("mentions") or ():
        line = m["line"] - 1
        if any(k.line < line <= k.end_line for k in kernels):  # inside the body, not the def line
            return _line_span(line, lines)
    return None


def _keyword(site: KernelSite, name: str) -> Span | None:
    return site.keyword_span(name)


def _call(site: KernelSite) -> Span:
    return site.call_span or site.span


def _first_line(span: Span, lines: list[str]) -> Span:
    return _line_span(span.line, lines)


def _line_span(line: int, lines: list[str]) -> Span:
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


def _related(site: KernelSite | None, span: Span, lines: list[str]) -> tuple[Related, ...]:
    if site is None:
        return ()
    out = []
    if site.kernel_def_span is not None and not (site.kernel_def_span.line <= span.line <= site.kernel_def_span.end_line):
        out.append(Related(_first_line(site.kernel_def_span, lines), f"kernel {site.kernel_name or ''} is defined here".replace("  ", " ")))
    call = _call(site)
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
                out.append(Related(_line_span(i, lines), f"{name} = {m.group(1)} is set here"))
                break
    return tuple(out)


# --------------------------------------------------------------------------- messages


_FOLDERS = re.compile(r"(?:[A-Za-z]:)?(?:[/\\][^\s:'\"()\[\]/\\]+)+[/\\](?=[^\s:'\"()\[\]/\\]+\.py\b)")
_BOILERPLATE = re.compile(r"\s*(?:Please (?:file an issue|report a bug) at:? \S+|See details at \S+)\.?")


def _clean_sentence(rec: Mapping[str, Any], code: str, site: KernelSite | None = None) -> str:
    sentence = str(rec.get("sentence") or rec.get("message") or "the check failed").strip()
    sentence = re.sub(r"\s+", " ", sentence)
    sentence = _FOLDERS.sub("", sentence)  # "/long/path/kernel.py:12" -> "kernel.py:12"
    sentence = _BOILERPLATE.sub("", sentence).strip()
    sentence = _readable_blocks(sentence)
    if _is_bare_type(sentence, rec):
        sentence = _empty_message_sentence(rec)
    if code == "PLS102" and site is not None and _CALL_ARITY.search(sentence):
        spec = _arity_mismatch(site)
        if spec is not None and site.grid is not None:
            sentence = (f"the index_map takes {spec.index_map_arity} parameter(s) but the grid has "
                        f"{len(site.grid)} dimension(s) ({sentence})")
    if code == "PLS201":
        vmem = rec.get("vmem")
        if vmem:
            sentence = (f"VMEM out of memory: {_mib(vmem['requested'])} requested, "
                        f"limit {_mib(vmem['limit'])} ({sentence})")
        elif not sentence.lower().startswith("vmem"):
            sentence = f"VMEM out of memory ({sentence})"
    if code == "PLS901":
        what = "running the script" if rec.get("stage") == "script" else "importing the file"  # script mode
        sentence = f"{what} failed: {rec.get('type')}: {sentence}"
    elif code == "PLS905":
        sentence = f"invalid task: {sentence}"
    elif rec.get("type") and not sentence.startswith(str(rec.get("type"))):
        if code in ("PLS100", "PLS200", "PLS111"):
            sentence = f"{rec.get('type')}: {sentence}"
    return sentence


def _is_bare_type(sentence: str, rec: Mapping[str, Any]) -> bool:
    """Whether the sentence says nothing but the exception's type (``assert`` with no message)."""
    bare = sentence.strip().rstrip(":.").strip()
    return bare in ("", str(rec.get("type") or ""), "the check failed")


def _empty_message_sentence(rec: Mapping[str, Any]) -> str:
    """For an exception raised with no text: say so, and where it was raised (the last traceback line)."""
    etype = str(rec.get("type") or "Exception")
    where = rec.get("raised_at")
    if where:
        code = f": `{where['code']}`" if where.get("code") else ""
        return (f"{etype} with an empty message, raised at {where['file']}:{where['line']} in "
                f"{where['function']}{code}")
    return f"{etype}() with an empty message (the exception carried no text; the worker did not say where it was raised)"


def _raised_at_text(rec: Mapping[str, Any]) -> str | None:
    where = rec.get("raised_at")
    if not where:
        return None
    return f"raised at {where['file']}:{where['line']} in {where['function']}" + (
        f": {where['code']}" if where.get("code") else "")


def _x64_sentence(compiler_said: str, lines: Sequence[str]) -> str:
    line = x64_setting_line(lines)
    where = (f"at line {line + 1}" if line is not None else
             "not in this file: the JAX_ENABLE_X64 environment variable or an imported module turned it on")
    return (f"jax_enable_x64 is on ({where}), so the Python ints of this kernel's index maps and grid are "
            f"traced as int64, which the TPU compiler cannot lower, even for a float32 kernel (it said: "
            f"{compiler_said}). Turn x64 off for this file, or trace the kernel with 32-bit ints by calling "
            f"the pallas_call inside `with jax.enable_x64(False):`.")


def _readable_blocks(sentence: str) -> str:
    """Lowering messages in user terms: ``(Blocked(block_size=8), ...)`` -> ``(8, ...)``, no jaxprs."""
    sentence = re.sub(r"Blocked\(block_size=(\d+)\)", r"\1", sentence)
    sentence = re.sub(r"Squeezed\(\)", "None", sentence)
    sentence = re.sub(r",? and index_map \{ lambda .*?\}", "", sentence)
    sentence = re.sub(r",? in memory space <MemorySpace\.\w+: '\w+'>", "", sentence)
    return sentence


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


# --------------------------------------------------------------------------- failed requests


_STAGE = re.compile(r"tier (?P<tier>\d): (?P<entry>[\w.]+)")
_AT_LINE = re.compile(r"^at line (?P<line>\d+) of ")


def parse_stage(message: str) -> dict[str, Any]:
    """What a progress message says about where the check is, or {}.

    ``tier 2: matmul (...)`` -> tier and entry; ``importing FILE`` -> the import stage;
    ``at line 12 of FILE`` (said near the time limit) -> ``{"line": 12}``, which refines the stage.
    """
    message = message or ""
    at = _AT_LINE.match(message)
    if at:
        return {"line": int(at.group("line"))}
    m = _STAGE.search(message)
    if not m:
        return {"stage": "import"} if message.startswith("importing") else {}
    return {"tier": int(m.group("tier")), "entry": m.group("entry")}


def reply_failure(status: str, message: str, text: str, analysis: Any, last_stage: Mapping[str, Any], target: str,
                  *, stderr: str = "", path: str | None = None) -> Finding | None:
    """The finding for a request that did not come back "ok" (None when it was cancelled).

    ``stderr``: the worker's last stderr lines (kept as the finding's detail); for a crash while
    importing ``path``, the Python traceback a fatal signal printed there names the line it was on.
    """
    if status == "cancelled":
        return None
    lines = text.splitlines()
    sites = tuple(getattr(analysis, "sites", ()) or ())
    tier = int(last_stage.get("tier") or 1)
    entry = last_stage.get("entry")
    site = next((s for s in sites if entry and s.enclosing_function == entry), sites[0] if sites else None)
    span = _call(site) if site is not None else Span.point(0)
    where = f" ({'tier %d' % tier}{', ' + entry if entry else ''})" if last_stage.get("tier") else (
        " (while importing the file)" if last_stage.get("stage") == "import" else "")
    importing = last_stage.get("stage") == "import"
    if importing and status in ("crashed", "memory") and not last_stage.get("line"):
        crashed_at = crash_line(stderr, path) if path else None
        last_stage = dict(last_stage, line=crashed_at) if crashed_at else last_stage
        span = Span.point(0)  # no line known: the file, not any pallas_call
    if last_stage.get("line"):  # the worker said where the user's code was (time ran out, or it crashed)
        span = _line_span(int(last_stage["line"]) - 1, lines)
        where = where[:-1] + f", at line {last_stage['line']})" if where else f" (at line {last_stage['line']})"
    if status == "timeout":
        code = "PLS205" if last_stage.get("tier") == 2 and not last_stage.get("line") else "PLS903"
        if (importing and not last_stage.get("line")) or (not last_stage and not site):
            span = _first_import_like_line(lines)
        body = f"the check ran past its time limit{where}: {message}".rstrip(": ")
    elif status == "memory":
        code, body = "PLS904", f"the check ran past its memory limit{where}: {message}".rstrip(": ")
    else:
        code, body = "PLS902", f"the check worker failed{where}: {message or status}"
    return Finding(
        code=code,
        message=body,
        span=span,
        severity=CODES[code].severity,
        tier=tier,
        detail=f"the worker's last stderr lines:\n{stderr}" if stderr.strip() else None,
        origin=ORIGIN_RUNNER,
        chip=target,
        kernel=site.kernel_name if site is not None and not importing else None,
        related=() if importing else _related(site, span, lines),
    )


_DUMP_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<function>.+)$', re.M)


def crash_line(stderr: str, path: str) -> int | None:
    """The 1-based line of ``path`` a crashed worker was running, from the Python traceback a fatal
    signal printed on its stderr (faulthandler: most recent call first, the crashing thread marked
    "Current thread"); None when there is none (SIGKILL prints nothing)."""
    import os

    block = stderr.split("Current thread", 1)[-1]
    name = os.path.basename(path)
    for m in _DUMP_FRAME.finditer(block):
        if m.group("file") == path or os.path.basename(m.group("file")) == name:
            return int(m.group("line"))
    return None


# How runner/client.py words a worker that never got as far as its handshake.
_STARTUP_FAILURES = ("the worker stopped before its handshake", "could not start the worker",
                     "the worker did not send its handshake")
_NO_MODULE = re.compile(r"No module named '?(?P<module>[\w.]+)'?")
_NOT_FOUND = re.compile(r"No such file or directory|command not found|not found", re.I)


def is_startup_failure(status: str, message: str) -> bool:
    """Whether a failed request means the worker never started (its environment, not the kernel)."""
    return status == "crashed" and (message or "").startswith(_STARTUP_FAILURES)


def startup_failure(message: str, stderr_tail: str, interpreter: str, launcher: Sequence[str],
                    tiers: Sequence[int], target: str) -> Finding:
    """One file-level finding (PLS906, at line 1) for a worker that could not start, saying what
    to install or set; the worker's stderr is quoted once (its last line), not repeated."""
    said = [line.strip() for line in (stderr_tail or "").splitlines() if line.strip()]
    last = said[-1] if said else ""
    where = " ".join(launcher) if launcher else interpreter
    missing = _NO_MODULE.search(last) or _NO_MODULE.search(message)
    run_tiers = ", ".join(str(t) for t in tiers)
    if missing and launcher:
        body = (f"the check worker could not start through `{where}`: it cannot import "
                f"{missing.group('module')} there. Install pallasite on that host (pip install pallasite), "
                f"so that `pallasite worker` runs")
    elif missing:
        module = missing.group("module").split(".")[0]
        body = (f"the check worker could not start: {interpreter} cannot import {module}. "
                f"Install {module} into {interpreter}: {interpreter} -m pip install {module}"
                + (" (or set the worker interpreter to the environment pallasite is installed in)"
                   if module == "pallasite" else ""))
    elif message.startswith("could not start the worker") or (launcher and _NOT_FOUND.search(last)):
        reason = re.sub(r"^\[Errno \d+\]\s*", "", message.split("): ", 1)[-1]) if message.startswith("could not start") else last
        body = (f"the check worker could not start: `{where}` cannot be run ({reason}). "
                f"Set the worker interpreter to a Python that has pallasite installed")
    else:
        first = message.split("; its stderr ends with", 1)[0]
        body = f"the check worker could not start: {first}" + (f"; it said: {last}" if last else "")
    return Finding(
        code="PLS906",
        message=f"{body}; tier(s) {run_tiers} were not run.",
        span=Span.point(0),
        severity="error",  # nothing past tier 0 was checked: not a pass
        tier=min(tiers) if tiers else 1,
        origin=ORIGIN_RUNNER,
        chip=target,
    )


def _first_import_like_line(lines: list[str]) -> Span:
    for i, line in enumerate(lines):
        if line.strip() and not line.lstrip().startswith(("#", '"""', "'''")):
            return _line_span(i, lines)
    return Span.point(0)

"""One mistake, one finding: a compiler tier that agrees with a tier-0 rule is folded into it.

When the source rules (tier 0) and the lowering or the TPU compiler (tiers 1-3) report the same
mistake, the user should see it once. The tier-0 finding is kept (it has the precise span and,
often, a fix); the compiler's finding becomes a related entry of it ("jax lowering (v6e) agrees
(PLS101): ..." at the compiler's span), and the kernel verdicts keep "error" for both tiers.

Two findings are "the same mistake" only when all of these hold:
- the compiler code is listed for the tier-0 code in ``SAME_MISTAKE`` (written out below, not
  guessed from titles);
- both are about the same pallas_call (the site whose parts contain each span; none for both when
  the file has no readable site);
- their spans overlap or lie within ``NEAR_LINES`` lines of each other;
- where one compiler code covers several mistakes (PLS110: a kernel's parameter count, or a
  returned value; PLS102: an index_map's arity, or its result count), the compiler's message says
  the mistake of the tier-0 code (``SAME_WORDS``).
Of the tier-0 findings a compiler finding could join, the nearest takes it (overlapping first, then
the fewest lines away), so a compiler error lands under the finding it is about. The line added
cites that finding ("jax lowering (v6e) agrees with PLS005 (as PLS110): ..."): the compiler's own
code follows "as". A compiler finding that matches nothing stays a finding of its own.

Client side, plain functions over ``Finding``; never imports jax.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Mapping, Sequence

from ...analysis.rules.writes import READ_BEFORE_WRITE
from ...analysis.types import Finding, Related, Span

# tier-0 code -> the compiler codes (tiers 1-3) that report the same mistake.
SAME_MISTAKE: dict[str, frozenset[str]] = {
    "PLS000": frozenset({"PLS000"}),  # syntax error: tier 0's parse and the worker's import
    "PLS001": frozenset({"PLS101", "PLS204"}),  # (8, 128) tiling of a block shape
    "PLS002": frozenset({"PLS102"}),  # index_map arity vs grid rank (the lowering's TypeError)
    "PLS003": frozenset({"PLS102"}),  # index_map result count vs block rank
    "PLS004": frozenset({"PLS105"}),  # dimension_semantics length vs grid rank
    "PLS005": frozenset({"PLS110"}),  # kernel parameter count
    "PLS006": frozenset({"PLS006"}),  # Python if/while on a program_id value (the tracer's bool conversion)
    "PLS007": frozenset({"PLS111", "PLS901"}),  # API removed from the installed jax
    "PLS008": frozenset({"PLS109"}),  # number of out_specs vs out_shape
    "PLS009": frozenset({"PLS110"}),  # kernel returns a value
    "PLS010": frozenset({"PLS204"}),  # rows below the dtype's sublane tiling
    "PLS011": frozenset({"PLS107"}),  # 64-bit dtype in the kernel
    "PLS012": frozenset({"PLS113"}),  # grid not a tuple of ints
    "PLS017": frozenset({"PLS303"}),  # an output written on no path (tier 3's NaN-filled output, at its parameter)
    "PLS020": frozenset({"PLS020", "PLS302"}),  # a block past the array's end (the recorded call; tier 3's read)
    "PLS018": frozenset({"PLS303"}),  # a scratch read before any write (tier 3's NaN, at the first read)
    "PLS115": frozenset({"PLS115"}),  # a kernel applied to a sharded array outside shard_map (the script's run)
    "PLS116": frozenset({"PLS116"}),  # an out_shape without the manual axis type under shard_map (the trace)
}

# (tier-0 code, compiler code) -> what the compiler's message says when it reports that mistake,
# for the compiler codes that cover more than one (catalog tier1.toml)
SAME_WORDS: dict[tuple[str, str], re.Pattern[str]] = {
    ("PLS005", "PLS110"): re.compile(r"positional argument|takes \d+ |missing \d+ required"),
    ("PLS009", "PLS110"): re.compile(r"should return None"),
    ("PLS002", "PLS102"): re.compile(r"positional argument|takes \d+ |missing \d+ required"),
    ("PLS003", "PLS102"): re.compile(r"must return \d+ values?|to match block_shape"),
}

NEAR_LINES = 2

_SEVERITY_RANK = {"hint": 0, "information": 1, "warning": 2, "error": 3}


def merge_agreeing(findings: Sequence[Finding], sites: Sequence[Any] = (),
                   severity: Mapping[str, str] | None = None) -> list[Finding]:
    """``findings`` with each compiler finding that repeats a tier-0 one folded into the nearest such
    tier-0 finding. ``severity`` is the user's per-code overrides (``--severity``, the ``severity``
    setting): a tier-0 code given one keeps it when the compiler agrees (the folded finding is that
    code's, so the user's level is its level)."""
    chosen = {code.upper() for code, level in (severity or {}).items() if level.lower() != "off"}
    out = list(findings)
    early = [i for i, f in enumerate(out) if f.tier == 0 and f.code in SAME_MISTAKE]
    absorbed: set[int] = set()
    for j, late in enumerate(out):
        if late.tier == 0:
            continue
        joins = [i for i in early if same_mistake(out[i], late, sites)]
        if not joins:
            continue
        i = min(joins, key=lambda k: _distance(out[k].span, late.span))
        absorbed.add(j)
        out[i] = _fold(out[i], late, keep_severity=out[i].code in chosen)
    return [f for k, f in enumerate(out) if k not in absorbed]


def same_mistake(early: Finding, late: Finding, sites: Sequence[Any] = ()) -> bool:
    """Whether compiler finding ``late`` reports the mistake of tier-0 finding ``early`` (see the top)."""
    if late.code not in SAME_MISTAKE.get(early.code, ()):
        return False
    words = SAME_WORDS.get((early.code, late.code))
    if words is not None and not words.search(late.message):
        return False
    return _same_place(early, late, sites)


def agreement_message(finding: Finding, under: str | None = None) -> str:
    """``jax lowering (v6e) agrees with PLS001 (as PLS101): <the compiler's first sentence>``: the
    tier-0 finding it is folded into (``under``), then the compiler's own code when it differs."""
    chip = f" ({finding.chip})" if finding.chip else ""
    if under is None or under == finding.code:
        return f"{finding.origin}{chip} agrees with {finding.code}: {first_sentence(finding.message)}"
    return f"{finding.origin}{chip} agrees with {under} (as {finding.code}): {first_sentence(finding.message)}"


def first_sentence(message: str) -> str:
    """The message up to its first full stop followed by a space (the whole message if none)."""
    cut = message.find(". ")
    return message if cut < 0 else message[: cut + 1]


_AGREES = re.compile(r" agrees with (PLS\d+)(?: \(as (PLS\d+)\))?: ")


def folded_codes(finding: Finding) -> set[str]:
    """The codes of the compiler findings ``merge_agreeing`` folded into ``finding`` (read from the related places
    ``_fold`` adds, written by ``agreement_message``)."""
    return {m.group(2) or m.group(1) for r in finding.related if (m := _AGREES.search(r.message))}


def _fold(early: Finding, late: Finding, *, keep_severity: bool = False) -> Finding:
    severity = early.severity
    if not keep_severity and _SEVERITY_RANK.get(late.severity, 0) > _SEVERITY_RANK.get(severity, 0):
        severity = late.severity  # the compiler rejected it: a tier-0 warning becomes an error
    return replace(
        early,
        severity=severity,
        related=early.related + (Related(late.span, agreement_message(late, early.code), late.path),),
        detail=early.detail or late.detail,
    )


def _same_place(a: Finding, b: Finding, sites: Sequence[Any]) -> bool:
    if (a.path or None) != (b.path or None):
        return False
    if any(_near(r.span, b.span) for r in a.related if r.message.endswith(READ_BEFORE_WRITE)):
        return True  # PLS018 said where the init went: tier 3 finds the garbage at the read it relates
    if _site_index(a.span, sites) != _site_index(b.span, sites):
        return False
    return _near(a.span, b.span)



def _near(a: Span, b: Span) -> bool:
    return _overlap(a, b) or abs(a.line - b.line) <= NEAR_LINES


def _distance(a: Span, b: Span) -> tuple[int, int]:
    """How far apart two spans are: (0 when they overlap else 1, lines between their starts)."""
    return (0 if _overlap(a, b) else 1, abs(a.line - b.line))


def _overlap(a: Span, b: Span) -> bool:
    return (a.line, a.column) <= (b.end_line, b.end_column) and (b.line, b.column) <= (a.end_line, a.end_column)


def _site_index(span: Span, sites: Sequence[Any]) -> int | None:
    """The pallas_call whose call, kernel, specs, grid or semantics contain ``span`` (None: none)."""
    for index, site in enumerate(sites):
        for part in _site_parts(site):
            if _overlap(part, span):
                return index
    return None


def _site_parts(site: Any) -> list[Span]:
    parts = [site.span, site.kernel_def_span, site.grid_span, site.dimension_semantics_span]
    for spec in tuple(site.in_specs or ()) + tuple(site.out_specs or ()):
        parts += [spec.span, spec.index_map_span]
    return [p for p in parts if p is not None]

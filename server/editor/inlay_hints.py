"""Inlay hints: the tuned value beside each block-size literal an autotune or an optimize run changed.

After ``pallasite.autotune`` each tunable literal the best configuration changes gets
`` → 256 (tuned, estimate v6e)``; after ``pallasite.optimize`` each BlockSpec dimension literal
the winner changed gets `` → 128 (optimized, estimate v6e)``, with the provenance of the number
that chose it. Nothing when no run is known or nothing changed.

A hint belongs to the document version its run started from. Once the document moves on, a hint
stays only while its literal still reads the same at its place: a stale range never points at
other text. No LSP types here (lsp.py converts), no JAX.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Sequence

from ...analysis.types import Span

from ..shifting import line_starts, offset_of
from ..features import Hint, HintSet  # noqa: F401  (the records this feature keeps)


def remember(ls: Any, uri: str, source: str, hints: HintSet) -> None:
    """Keep ``hints`` as the latest of ``source`` ("tune" or "optimize") for ``uri`` (the session's
    feature state)."""
    ls.session.features.remember_hints(uri, source, hints)


def known(ls: Any, uri: str) -> list[HintSet]:
    return ls.session.features.hints_of(uri)


def provenance_words(label: str) -> str:
    """``estimate (v6e)`` -> ``estimate v6e`` (one level of parentheses in a hint)."""
    return re.sub(r"\s*\(([^()]*)\)\s*$", r" \1", label.strip()) or "provenance unknown"


def text_at(text: str, span: Span, starts: Sequence[int] | None = None) -> str:
    starts = line_starts(text) if starts is None else starts
    begin = offset_of(text, starts, span.line, span.column)
    return text[begin:max(begin, offset_of(text, starts, span.end_line, span.end_column))]


def from_tune(version: int, report: Any) -> HintSet:
    """Hints for the literals an autotune's best configuration changes (``report.edits``)."""
    by_span = {t.value_span: t for t in report.tunables if t.value_span is not None}
    hints = []
    for edit in report.edits:
        tunable = by_span.get(edit.span)
        if tunable is None or str(tunable.default) == edit.new_text.strip():
            continue
        provenance = report.best_provenance or report.label
        hints.append(Hint(edit.span, str(tunable.default),
                          f" → {edit.new_text.strip()} (tuned, {provenance_words(provenance)})",
                          f"autotune for {report.chip}: {tunable.name} {tunable.default} → {edit.new_text.strip()}, "
                          f"chosen by {provenance}; apply it with the \"Apply autotuned\" code action"))
    return HintSet(version, tuple(hints))


def _block_dims(text: str) -> list[list[tuple[tuple, tuple]]]:
    """Per pallas_call site: each BlockSpec's (block_shape, dim_spans), in_specs then out_specs."""
    from ...analysis.sites import find_sites
    from ...analysis.source import Source

    out = []
    for site in find_sites(Source(text)):
        specs = [*(site.in_specs or ()), *(site.out_specs or ())]
        out.append([(tuple(s.block_shape or ()), tuple(s.dim_spans)) for s in specs])
    return out


def from_optimize(version: int, original: str, winner: str | None, label: str) -> HintSet:
    """Hints for the BlockSpec dimension literals of ``original`` that the winner's source changes
    (sites and specs paired in order; only int literals on both sides)."""
    if not winner or winner == original:
        return HintSet(version)
    try:
        before, after = _block_dims(original), _block_dims(winner)
    except Exception:  # noqa: BLE001 - a winner the analysis cannot read gets no hints, never a failure
        return HintSet(version)
    starts = line_starts(original)
    hints: dict[Span, Hint] = {}
    for site_before, site_after in zip(before, after):
        for (shape, spans), (new_shape, _) in zip(site_before, site_after):
            for old, new, span in zip(shape, new_shape, spans):
                if not (isinstance(old, int) and isinstance(new, int)) or old == new or span in hints:
                    continue
                literal = text_at(original, span, starts)
                if literal != str(old):  # a module constant's name, not a literal: the hint would mislead
                    continue
                hints[span] = Hint(span, literal, f" → {new} (optimized, {provenance_words(label)})",
                                   f"the optimize run's winner uses {new} here (was {old}); ranked by {label}")
    return HintSet(version, tuple(hints.values()))


def visible(sets: Iterable[HintSet], version: int, text: str, window: Span | None = None) -> list[Hint]:
    """The hints to show on the document as it is now (``window``: the requested range)."""
    starts = line_starts(text)
    out = []
    for hint_set in sets:
        for hint in hint_set.hints:
            if window is not None and not (window.line <= hint.span.end_line <= window.end_line):
                continue
            if hint_set.version != version and text_at(text, hint.span, starts) != hint.literal:
                continue  # the document moved on and this literal is gone from its place
            out.append(hint)
    return out

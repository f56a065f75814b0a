"""Moving findings through text edits, so results computed for an older text stay truthful.

A compiler check takes a snapshot of the text; while it runs (and after), the user keeps typing.
Before its findings are shown they are carried through every edit made since the snapshot:

- a finding entirely before an edit stays where it is;
- a finding entirely after it moves with the text (lines and columns);
- a finding whose range the edit touched is dropped: the text it talked about is gone.

An insertion exactly at a finding's start moves the finding; one exactly at its end leaves it.
Fixes move with their finding and are dropped (the finding kept) when an edit touched one of their
spans. Everything here uses ``Span`` coordinates (0-based lines, code-point columns); the LSP layer
converts client positions first (server/lsp_convert.py).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from ..analysis.types import Finding, Fix, Related, Span, TextEdit

_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Edit:
    """One replacement of ``span`` (in the text it applies to) by ``new_text``."""

    span: Span
    new_text: str


def _end_of(start_line: int, start_column: int, text: str) -> tuple[int, int]:
    """Where ``text`` ends when inserted at (start_line, start_column)."""
    breaks = list(_BREAK.finditer(text))
    if not breaks:
        return start_line, start_column + len(text)
    return start_line + len(breaks), len(text) - breaks[-1].end()


def shift_position(line: int, column: int, edit: Edit) -> tuple[int, int]:
    """A position at or after the edit's end, as it reads after the edit."""
    s = edit.span
    new_end_line, new_end_column = _end_of(s.line, s.column, edit.new_text)
    if line == s.end_line:
        return new_end_line, new_end_column + (column - s.end_column)
    return line + (new_end_line - s.end_line), column


def shift_span(span: Span, edit: Edit) -> Span | None:
    """``span`` after ``edit``; None when the edit touched it."""
    start, end = (span.line, span.column), (span.end_line, span.end_column)
    edit_start, edit_end = (edit.span.line, edit.span.column), (edit.span.end_line, edit.span.end_column)
    if edit_end <= start:
        line, column = shift_position(span.line, span.column, edit)
        end_line, end_column = shift_position(span.end_line, span.end_column, edit)
        return Span(line, column, end_line, end_column)
    if edit_start >= end:
        return span
    return None


def shift_span_through(span: Span, edits: Iterable[Edit]) -> Span | None:
    for edit in edits:
        span = shift_span(span, edit)
        if span is None:
            return None
    return span


def _shift_fix(fix: Fix, edits: Sequence[Edit]) -> Fix | None:
    moved = []
    for text_edit in fix.edits:
        span = shift_span_through(text_edit.span, edits)
        if span is None:
            return None
        moved.append(TextEdit(span, text_edit.new_text))
    return replace(fix, edits=tuple(moved))


def shift_finding(finding: Finding, edits: Sequence[Edit]) -> Finding | None:
    """The finding as it reads after ``edits`` (applied in order), or None if its range was edited."""
    if not edits:
        return finding
    span = shift_span_through(finding.span, edits)
    if span is None:
        return None
    related = []
    for rel in finding.related:
        if rel.path is not None:
            related.append(rel)  # another file: our edits do not move it
            continue
        rel_span = shift_span_through(rel.span, edits)
        if rel_span is not None:
            related.append(Related(rel_span, rel.message, rel.path))
    fix = _shift_fix(finding.fix, edits) if finding.fix is not None else None
    return replace(finding, span=span, related=tuple(related), fix=fix)


def shift_findings(findings: Iterable[Finding], edits: Sequence[Edit]) -> list[Finding]:
    """Every finding that survives ``edits``, moved to where its text now is."""
    out = []
    for finding in findings:
        moved = shift_finding(finding, edits)
        if moved is not None:
            out.append(moved)
    return out


# --------------------------------------------------------------------------- applying edits


def line_starts(text: str) -> list[int]:
    """Offsets of the first character of each line (LSP line breaks: \\n, \\r\\n, \\r)."""
    return [0, *(m.end() for m in _BREAK.finditer(text))]


def offset_of(text: str, starts: Sequence[int], line: int, column: int) -> int:
    """Code-point offset of (line, column), clamped to the text (as LSP asks of positions)."""
    if line >= len(starts):
        return len(text)
    line_end = starts[line + 1] if line + 1 < len(starts) else len(text)
    content = text[starts[line]:line_end]
    width = len(content.rstrip("\r\n"))
    return starts[line] + min(column, width)


def apply_edit(text: str, edit: Edit) -> str:
    """``text`` with ``edit`` applied."""
    return LineIndex(text).apply(edit)


class LineIndex:
    """One text and where its lines start (LSP line breaks), found lazily from the top and kept
    through edits: an edit keeps the starts before it, the rest are found again when a line past it
    is asked for. Typing into a 5 MB document then costs the edited line, not a split of the whole
    text per keystroke (150-250 ms each, which held every other request of the server)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = [0]
        self._complete = False

    def _reach(self, line: int) -> None:
        """Find line starts until ``line`` has one (or the text ends)."""
        if self._complete or line < len(self._starts):
            return
        for match in _BREAK.finditer(self.text, self._starts[-1]):
            self._starts.append(match.end())
            if len(self._starts) > line + 1:  # one more: the line's end
                return
        self._complete = True

    def __len__(self) -> int:
        self._reach(len(self.text) + 1)
        return len(self._starts)

    def __getitem__(self, index: int) -> str:
        if index < 0:
            index += len(self)
        self._reach(index + 1)
        if not 0 <= index < len(self._starts):
            raise IndexError(index)
        return self.line(index)

    def line(self, index: int) -> str:
        """Line ``index`` without its break ("" past the end)."""
        self._reach(index + 1)
        if index < 0 or index >= len(self._starts):
            return ""
        end = self._starts[index + 1] if index + 1 < len(self._starts) else len(self.text)
        return self.text[self._starts[index]:end].rstrip("\r\n")

    def offset(self, line: int, column: int) -> int:
        """Code-point offset of (line, column), clamped to the text (as LSP asks of positions)."""
        self._reach(line + 1)
        if line >= len(self._starts):
            return len(self.text)
        return self._starts[line] + min(column, len(self.line(line)))

    def edited(self, edit: Edit) -> "LineIndex":
        """A new index of the text after ``edit``, this one unchanged (a snapshot's index is never
        edited in place): the line starts before the edit are kept, the rest found again lazily."""
        begin = self.offset(edit.span.line, edit.span.column)
        end = max(begin, self.offset(edit.span.end_line, edit.span.end_column))
        after = LineIndex(self.text[:begin] + edit.new_text + self.text[end:])
        after._starts = self._starts[:max(1, bisect.bisect_left(self._starts, begin))]
        return after

    def apply(self, edit: Edit) -> str:
        """Apply ``edit``; the new text."""
        begin = self.offset(edit.span.line, edit.span.column)
        end = max(begin, self.offset(edit.span.end_line, edit.span.end_column))
        self.text = self.text[:begin] + edit.new_text + self.text[end:]
        # starts up to the edit stay; one at the edit itself may merge with it ("\r" + "\n")
        del self._starts[max(1, bisect.bisect_left(self._starts, begin)):]
        self._complete = False
        return self.text

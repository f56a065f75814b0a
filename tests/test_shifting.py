"""Findings carried through edits (server/shifting.py) and column conversion (server/lsp_convert.py)."""

from __future__ import annotations

from lsprotocol import types as lsp

from pallasite.analysis.types import Finding, Fix, Related, Span, TextEdit
from pallasite.server.lsp_convert import (
    UTF8, UTF16, UTF32, change_to_edit, column_from_client, column_to_client, fix_to_document_edit, span_to_range,
    text_lines,
)
from pallasite.server.shifting import Edit, apply_edit, shift_finding, shift_findings, shift_span

TEXT = "a = 1\nb = pl.pallas_call(k)\nc = 3\n"
CALL = Span(1, 4, 1, 18)  # pl.pallas_call


def finding(span=CALL, **kw):
    return Finding("PLS200", "compiler says no", span, tier=2, **kw)


def test_insert_line_above_moves_finding_down():
    edit = Edit(Span(0, 0, 0, 0), "# comment\n")
    assert shift_span(CALL, edit) == Span(2, 4, 2, 18)
    new = apply_edit(TEXT, edit)
    assert new.splitlines()[2][4:18] == "pl.pallas_call"


def test_edit_inside_range_drops_finding():
    assert shift_span(CALL, Edit(Span(1, 7, 1, 8), "X")) is None
    assert shift_findings([finding()], [Edit(Span(1, 7, 1, 8), "X")]) == []


def test_edit_after_range_leaves_it_and_same_line_before_moves_columns():
    assert shift_span(CALL, Edit(Span(1, 20, 1, 21), "zz")) == CALL
    assert shift_span(CALL, Edit(Span(1, 0, 1, 1), "bbb")) == Span(1, 6, 1, 20)


def test_insert_at_start_moves_insert_at_end_keeps():
    assert shift_span(CALL, Edit(Span(1, 4, 1, 4), "  ")) == Span(1, 6, 1, 20)
    assert shift_span(CALL, Edit(Span(1, 18, 1, 18), "  ")) == CALL


def test_joining_lines_before_moves_finding_up_and_right():
    # delete the line break after "a = 1": line 1 joins line 0 after column 5
    edit = Edit(Span(0, 5, 1, 0), " ; ")
    assert shift_span(CALL, edit) == Span(0, 12, 0, 26)
    new = apply_edit(TEXT, edit)
    assert new.splitlines()[0][12:26] == "pl.pallas_call"


def test_fix_and_related_move_with_finding_and_fix_dropped_when_touched():
    fix = Fix("rename", (TextEdit(Span(2, 0, 2, 1), "d"),))
    f = finding(fix=fix, related=(Related(Span(0, 0, 0, 1), "def here"),))
    moved = shift_finding(f, [Edit(Span(0, 0, 0, 0), "\n")])
    assert moved.span == Span(2, 4, 2, 18)
    assert moved.fix.edits[0].span == Span(3, 0, 3, 1)
    assert moved.related[0].span == Span(1, 0, 1, 1)
    touched = shift_finding(f, [Edit(Span(2, 0, 2, 1), "e")])
    assert touched is not None and touched.fix is None
    no_related = shift_finding(f, [Edit(Span(0, 0, 0, 1), "x")])
    assert no_related.related == ()


def test_sequential_edits_compose():
    edits = [Edit(Span(0, 0, 0, 0), "x\n"), Edit(Span(0, 0, 0, 0), "y\n"), Edit(Span(3, 0, 3, 0), "q")]
    text = TEXT
    for e in edits:
        text = apply_edit(text, e)
    moved = shift_findings([finding()], edits)
    assert moved[0].span == Span(3, 5, 3, 19)
    assert text.splitlines()[3][5:19] == "pl.pallas_call"


def test_columns_in_utf16_utf8_utf32():
    line = "x = '😀é' + pl.pallas_call"
    col = line.index("pl")
    assert column_to_client(line, col, UTF32) == col
    assert column_to_client(line, col, UTF16) == col + 1  # the emoji is two UTF-16 units
    assert column_to_client(line, col, UTF8) == col + 3 + 1  # 4 bytes emoji, 2 bytes é
    for enc in (UTF8, UTF16, UTF32):
        assert column_from_client(line, column_to_client(line, col, enc), enc) == col


def test_change_event_to_edit_converts_utf16_range():
    text = "s = '😀'; y = 1\n"
    lines = text_lines(text)
    change = lsp.TextDocumentContentChangePartial(
        range=lsp.Range(lsp.Position(0, 10), lsp.Position(0, 11)), text="z")
    edit = change_to_edit(change, lines, UTF16)
    assert apply_edit(text, edit) == "s = '😀'; z = 1\n"


def test_fix_as_versioned_edit_and_range_encoding():
    lines = text_lines("é = (8, 100)\n")
    fix = Fix("Use 128 lanes", (TextEdit(Span(0, 8, 0, 11), "128"),))
    doc_edit = fix_to_document_edit(fix, "file:///k.py", 7, lines, UTF8)
    assert doc_edit.text_document.version == 7
    assert doc_edit.edits[0].range == lsp.Range(lsp.Position(0, 9), lsp.Position(0, 12))
    assert span_to_range(Span(0, 8, 0, 11), lines, UTF16).start.character == 8


def test_the_line_index_kept_through_edits_agrees_with_splitting_the_text():
    """A document's LineIndex (server/shifting.py) keeps the starts before each edit and finds the
    rest lazily; every line and offset must be what a fresh split of the new text gives, across
    edits that join or split "\\r\\n" pairs."""
    import random

    from pallasite.server.lsp_convert import text_lines
    from pallasite.server.shifting import LineIndex, line_starts, offset_of

    rng = random.Random(5)
    pieces = ["a", "bc", "\n", "\r", "\r\n", "\u00e9", "\U0001f600", "  x = 1"]
    text = "".join(rng.choice(pieces) for _ in range(300))
    index = LineIndex(text)
    for _ in range(300):
        lines = text_lines(text)
        line = rng.randrange(len(lines) + 1)
        column = rng.randrange(8)
        end_line = min(len(lines), line + rng.randrange(2))
        end_column = rng.randrange(8)
        if (end_line, end_column) < (line, column):
            end_line, end_column = line, column
        if rng.random() < 0.5:  # ask about a line first, so the index holds starts past the edit
            probe = rng.randrange(len(lines))
            assert index.line(probe) == lines[probe]
        edit = Edit(Span(line, column, end_line, end_column), "".join(rng.choice(pieces) for _ in range(rng.randrange(4))))
        starts = line_starts(text)  # the reference: offsets from a full scan of the old text
        begin = offset_of(text, starts, line, column)
        text = text[:begin] + edit.new_text + text[max(begin, offset_of(text, starts, end_line, end_column)):]
        assert index.apply(edit) == text
        lines = text_lines(text)
        assert len(index) == len(lines) and [index.line(i) for i in range(len(lines))] == lines

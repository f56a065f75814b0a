"""Where the index of an out-of-bounds read was computed (runner/index_origin.py), read from the stack
jax's interpreter printed for the read. The file is tests/data/tier3_places/oob_offset_helper.py: its
page-table read in a descriptor method takes an offset its helper computes one too far."""

from __future__ import annotations

import ast
from pathlib import Path

from pallasite.runner.index_origin import index_origin

TEXT = (Path(__file__).parent / "data" / "tier3_places" / "oob_offset_helper.py").read_text()


def _line(text: str, needle: str) -> int:
    [line] = [i + 1 for i, t in enumerate(text.splitlines()) if needle in t]
    return line


def _frames(text: str) -> list[tuple[int, str]]:
    """The stack the interpreter prints for the read, outermost first (Python 3.11: comprehensions have frames)."""
    return [(_line(text, "copies_for(row).run()"), "gather_kernel"),
            (_line(text, "return PageCopies("), "copies_for"),
            (_line(text, "self._copies = [self._copy(i)"), "__init__"),
            (_line(text, "self._copies = [self._copy(i)"), "<listcomp>"),
            (_line(text, "page = self._table[self._start + i"), "_copy")]


def test_the_offset_computed_in_the_helper_is_the_origin():
    origin = index_origin(_frames(TEXT), ast.parse(TEXT))
    assert origin is not None and origin.line == _line(TEXT, "start = r * PAGES_PER_ROW + 1")
    assert "r * PAGES_PER_ROW + 1" in origin.what


def test_an_index_that_adds_a_constant_where_it_is_read_is_its_own_origin():
    text = TEXT.replace("start = r * PAGES_PER_ROW + 1", "start = r * PAGES_PER_ROW").replace(
        "page = self._table[self._start + i]", "page = self._table[self._start + i + 1]")
    assert index_origin(_frames(text), ast.parse(text)) is None


def test_a_stack_that_cannot_be_followed_gives_nothing():
    assert index_origin([(999, "nowhere")], ast.parse(TEXT)) is None
    assert index_origin(_frames(TEXT), None) is None

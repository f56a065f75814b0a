"""The edit format a model answers in, and applying it in memory.

A model proposes search/replace blocks, as JSON (the structured-output schema ``PROPOSAL_SCHEMA``)::

    {"explanation": "the lane dim must be a multiple of 128",
     "edits": [{"search": "pl.BlockSpec((8, 100),", "replace": "pl.BlockSpec((8, 128),"}]}

or, from a model without structured output, as text blocks::

    <<<<<<< SEARCH
    pl.BlockSpec((8, 100),
    =======
    pl.BlockSpec((8, 128),
    >>>>>>> REPLACE

Each search text must occur exactly once in the file (after the blocks before it were applied); a
block that is missing, ambiguous or changes nothing is an ``EditError`` whose message is fed back
to the model. ``hunks`` reduces the result to the changed line ranges (the minimal edit shown and
applied), ``unified_diff`` prints it.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass

PROPOSAL_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string", "description": "One or two sentences: what was wrong and what the edit changes."},
        "edits": {
            "type": "array",
            "description": "Search/replace blocks. Each search is an exact, unique excerpt of the current file.",
            "items": {
                "type": "object",
                "properties": {"search": {"type": "string"}, "replace": {"type": "string"}},
                "required": ["search", "replace"],
            },
        },
    },
    "required": ["explanation", "edits"],
}

_BLOCK = re.compile(r"<{5,9} SEARCH\n(.*?)\n?={5,9}\n(.*?)\n?>{5,9} REPLACE", re.S)
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.S)


class EditError(ValueError):
    """A proposal that cannot be applied; the message says why (it goes back to the model)."""


@dataclass(frozen=True)
class SearchReplace:
    search: str
    replace: str


@dataclass(frozen=True)
class Proposal:
    explanation: str
    edits: tuple[SearchReplace, ...]


@dataclass(frozen=True)
class Hunk:
    """Lines ``start`` .. ``end`` (0-based, end exclusive) of the original become ``lines``."""

    start: int
    end: int
    lines: tuple[str, ...]  # each with its line ending


def parse_proposal(text: str) -> Proposal:
    """The proposal in a model's reply (JSON, fenced JSON, or SEARCH/REPLACE blocks)."""
    data = _json_object(text)
    if data is not None:
        if not isinstance(data.get("edits"), list):
            raise EditError("the reply's JSON has no 'edits' list (expected {\"explanation\": ..., \"edits\": "
                            "[{\"search\": ..., \"replace\": ...}]})")
        edits = []
        for i, item in enumerate(data["edits"], 1):
            if not (isinstance(item, dict) and isinstance(item.get("search"), str)
                    and isinstance(item.get("replace"), str)):
                raise EditError(f"edit {i} is not an object with string 'search' and 'replace'")
            edits.append(SearchReplace(item["search"], item["replace"]))
        explanation = data.get("explanation")
        return Proposal(explanation if isinstance(explanation, str) else "", tuple(edits))
    blocks = _BLOCK.findall(text)
    if blocks:
        explanation = _BLOCK.sub("", text).strip()
        return Proposal(explanation[:2000], tuple(SearchReplace(s, r) for s, r in blocks))
    preview = " ".join(text.split())[:160]
    raise EditError(f"the reply holds no edit: expected JSON with 'edits' or SEARCH/REPLACE blocks, got {preview!r}")


def _json_object(text: str) -> dict | None:
    candidates = [text.strip(), *(m.strip() for m in _FENCE.findall(text))]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def apply_edits(text: str, edits: tuple[SearchReplace, ...] | list[SearchReplace]) -> str:
    """``text`` with every block applied in order; EditError naming the first block that fails."""
    if not edits:
        raise EditError("the proposal has no edits")
    for i, edit in enumerate(edits, 1):
        if not edit.search.strip():
            raise EditError(f"edit {i}: the search text is empty (quote the lines to replace)")
        if edit.search == edit.replace:
            raise EditError(f"edit {i}: the search and replace texts are the same (it changes nothing)")
        count = text.count(edit.search)
        if count == 1:
            text = text.replace(edit.search, edit.replace, 1)
            continue
        if count > 1:
            raise EditError(f"edit {i}: the search text occurs {count} times; include more surrounding lines "
                            "so it is unique")
        text = _apply_loose(text, edit, i)
    return text


def _apply_loose(text: str, edit: SearchReplace, i: int) -> str:
    """Match line by line ignoring trailing whitespace (models often drop or add it)."""
    lines = text.splitlines(keepends=True)
    want = [line.rstrip() for line in edit.search.strip("\n").split("\n")]
    have = [line.rstrip() for line in lines]
    found = [k for k in range(len(have) - len(want) + 1) if have[k:k + len(want)] == want]
    if len(found) == 1:
        k = found[0]
        replace = edit.replace.strip("\n")
        ending = "\n" if lines[k + len(want) - 1].endswith("\n") else ""
        new = (replace + ending) if replace else ""
        return "".join(lines[:k]) + new + "".join(lines[k + len(want):])
    if len(found) > 1:
        raise EditError(f"edit {i}: the search text occurs {len(found)} times; include more surrounding lines")
    close = difflib.get_close_matches(want[0], have, n=1, cutoff=0.6) if want else []
    hint = f"; the closest line in the file is {close[0].strip()!r}" if close else ""
    raise EditError(f"edit {i}: the search text is not in the file (it must be copied exactly){hint}")


def hunks(old: str, new: str) -> list[Hunk]:
    """The changed line ranges turning ``old`` into ``new`` (the minimal edit)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    return [Hunk(i1, i2, tuple(b[j1:j2])) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def touched_lines(old: str, new: str) -> set[int]:
    """0-based lines of ``old`` that the change replaces or deletes (an insertion touches the line it
    is inserted before)."""
    out: set[int] = set()
    for h in hunks(old, new):
        out.update(range(h.start, h.end) if h.end > h.start else (h.start,))
    return out


def unified_diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}", n=2))

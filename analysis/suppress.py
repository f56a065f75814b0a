"""Suppression comments and per-code severity overrides, applied to findings of every tier.

- ``# pallasite: ignore`` drops every finding whose first line is that line or the line below;
- ``# pallasite: ignore[PLS001, PLS004]`` drops only those codes;
- ``severity_overrides`` maps a code to "error" | "warning" | "information" | "hint" | "off"
  ("off" drops it). Unknown severities are ignored (settings validation reports them).

Comments are found with tree-sitter, so the same text inside a string is not a suppression.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterable, Mapping

from .source import parse, walk
from .types import SEVERITIES, Finding

_COMMENT = re.compile(r"#\s*pallasite\s*:\s*ignore\b(?:\[([^\]]*)\])?", re.IGNORECASE)
ALL = "*"


def suppressions(text: str) -> dict[int, frozenset[str]]:
    """0-based line -> codes suppressed by a comment on that line (``{"*"}`` for all)."""
    if "pallasite" not in text:
        return {}
    found: dict[int, frozenset[str]] = {}
    tree = parse(text)
    for node in walk(tree.root_node):
        if node.type != "comment":
            continue
        comment = node.text.decode("utf-8", errors="replace") if node.text else ""
        match = _COMMENT.search(comment)
        if match is None:
            continue
        if match.group(1) is None:
            codes = frozenset({ALL})
        else:
            codes = frozenset(c.strip().upper() for c in match.group(1).split(",") if c.strip())
        line = node.start_point[0]
        found[line] = found.get(line, frozenset()) | codes
    return found


def _own_line_comment(text_lines: list[str], line: int) -> bool:
    return 0 <= line < len(text_lines) and text_lines[line].lstrip().startswith("#")


def apply_suppressions(findings: Iterable[Finding], text: str,
                       severity_overrides: Mapping[str, str]) -> tuple[Finding, ...]:
    """The findings left after suppression comments, with severities overridden."""
    table = suppressions(text)
    lines = text.splitlines() if table else []
    kept: list[Finding] = []
    for item in findings:
        if table and _suppressed(item, table, lines):
            continue
        override = severity_overrides.get(item.code) if severity_overrides else None
        if override is not None:
            override = override.lower()
            if override == "off":
                continue
            if override in SEVERITIES and override != item.severity:
                item = replace(item, severity=override)  # type: ignore[arg-type]
        kept.append(item)
    return tuple(kept)


def _suppressed(item: Finding, table: dict[int, frozenset[str]], lines: list[str]) -> bool:
    if item.path is not None:
        return False  # a finding located in another file: that file's comments are not read here
    line = item.span.line
    for candidate in (line, line - 1):
        codes = table.get(candidate)
        if codes is None:
            continue
        if candidate == line - 1 and not _own_line_comment(lines, candidate):
            continue  # a trailing comment on the line above speaks for that line only
        if ALL in codes or item.code.upper() in codes:
            return True
    return False

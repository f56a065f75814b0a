"""The compiler-message table: which finding code a jax / libtpu / TPU-interpreter message names.

One ordered table of data (``compiler_messages.toml`` next to this file), read by the checker's
locator (``engine/findings/classify.py``: the code of a worker's error record) and by the error catalog
(``knowledge/catalog.py``: ``recognise``, and each entry's ``patterns``), so the two cannot
disagree. Rows are tried in order and the first row with a matching pattern names the code; a
family's catch-all (PLS100/PLS200/PLS300) ranks after every specific row; a row applies to the
messages of the check tiers it lists, and a row that ``requires`` a flag (``x64``) only to records
that carry it (or when the flags are not known, as for a message pasted into the docs search).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..analysis.codes import CODES

TABLE_FILE = Path(__file__).with_name("compiler_messages.toml")
_KEYS = {"code", "tiers", "patterns", "requires", "compiler_codes"}
FLAGS = ("x64",)  # what a worker's record may say about how the message arose


class MessageTableError(ValueError):
    """The table file is malformed (says which row and what is wrong)."""


@dataclass(frozen=True)
class MessageRow:
    code: str
    tiers: tuple[int, ...]  # the check tiers whose messages this row reads
    patterns: tuple[str, ...]  # regular expressions, case-insensitive, "." matches newlines
    regex: re.Pattern[str]  # the patterns as one alternation
    requires: str | None = None  # a flag of the record (FLAGS) without which the row does not apply
    compiler_codes: tuple[tuple[str, str], ...] = ()  # libtpu's error codes its messages carry, with its names

    @property
    def catch_all(self) -> bool:
        """PLS100 / PLS200 / PLS300: the family's code when no specific row matches."""
        return self.code.endswith("00") and self.code != "PLS000"


def table() -> tuple[MessageRow, ...]:
    """The rows of ``TABLE_FILE`` in order; MessageTableError names the row and the problem."""
    return _load(TABLE_FILE)


@lru_cache(maxsize=4)
def _load(path: Path) -> tuple[MessageRow, ...]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise MessageTableError(f"{path}: cannot read the compiler-message table: {err}") from err
    rows: list[MessageRow] = []
    for number, row in enumerate(data.get("message", ()), start=1):
        where = f"{path.name} row {number} ({row.get('code', 'no code')})"
        unknown = set(row) - _KEYS
        if unknown:
            raise MessageTableError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
        code = str(row.get("code", ""))
        if code not in CODES:
            raise MessageTableError(f"{where}: {code!r} is not a finding code of analysis/codes.py")
        requires = row.get("requires")
        if requires is not None and requires not in FLAGS:
            raise MessageTableError(f"{where}: requires = {requires!r}; known flags: {', '.join(FLAGS)}")
        if any(r.code == code and r.requires == requires for r in rows):
            raise MessageTableError(f"{where}: {code} has a row already (one per code and 'requires')")
        patterns = tuple(row.get("patterns") or ())
        tiers = tuple(row.get("tiers") or ())
        if not patterns or not tiers or not set(tiers) <= {0, 1, 2, 3}:
            raise MessageTableError(f"{where}: needs non-empty 'patterns' and 'tiers' (of 0-3)")
        try:
            regex = re.compile("|".join(f"(?:{p})" for p in patterns), re.I | re.S)
        except re.error as err:
            raise MessageTableError(f"{where}: bad pattern: {err}") from err
        named = row.get("compiler_codes") or {}
        if not isinstance(named, dict) or not all(re.fullmatch(r"E\d{4}", k) and isinstance(v, str)
                                                   for k, v in named.items()):
            raise MessageTableError(f"{where}: compiler_codes maps libtpu codes (E1001) to libtpu's names")
        rows.append(MessageRow(code, tiers, patterns, regex, requires, tuple(sorted(named.items()))))
    return tuple(rows)


def _applies(row: MessageRow, tier: int | None, flags: Collection[str] | None) -> bool:
    return (tier is None or tier in row.tiers) and (row.requires is None or flags is None or row.requires in flags)


def codes_for(message: str, tier: int | None = None, flags: Collection[str] | None = None) -> list[str]:
    """The codes whose rows match ``message``, best first: specific rows in table order, then
    catch-alls. Only rows for ``tier`` when given; ``flags``: what the worker's record says (e.g.
    {"x64"}), None when not known (then rows that require a flag apply)."""
    found = [r for r in table() if _applies(r, tier, flags) and r.regex.search(message)]
    return list(dict.fromkeys(r.code for r in sorted(found, key=lambda r: r.catch_all)))  # stable sort


def first_specific_code(message: str, tier: int | None = None, flags: Collection[str] | None = None) -> str | None:
    """``codes_for``'s first code that is not a catch-all (None if none), without trying the rows
    after it: what the checker's locator asks for every error record."""
    for row in table():
        if not row.catch_all and _applies(row, tier, flags) and row.regex.search(message):
            return row.code
    return None


def compiler_code(name: str) -> tuple[str, str] | None:
    """(the finding code, libtpu's name) for one of libtpu's own error codes (``E1001``), None if no row names it."""
    for row in table():
        for code, said in row.compiler_codes:
            if code == name.strip().upper():
                return row.code, said
    return None


def compiler_codes() -> tuple[str, ...]:
    """Every libtpu error code the table names."""
    return tuple(code for row in table() for code, _ in row.compiler_codes)


def patterns_of(code: str) -> tuple[str, ...]:
    """The patterns that name ``code`` (empty when no message does)."""
    return tuple(p for r in table() if r.code == code for p in r.patterns)

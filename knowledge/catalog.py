"""The error catalog: what each finding code means, how it is recognised, and how to fix it.

One entry per code of ``pallasite.analysis.codes.CODES``, written in TOML files under
``knowledge/catalog/`` (one per family). The registry stays the source of truth for titles,
hints and severities; the catalog adds the long form:

    entry("PLS201").explanation       # plain words: the TPU constraint and why
    explain("PLS201")                 # formatted for a terminal or a hover (markdown=True)
    recognise("ValueError", message)  # catalog entries whose patterns match a compiler message

Which message names which code is not written here but in the one compiler-message table
(``knowledge/compiler_messages.toml``), which the checker's locator reads too; an entry's
``patterns`` are its rows there. The LLM fixer receives ``explain(code, markdown=False)`` in its prompt.
"""

from __future__ import annotations

import difflib
import re
import textwrap
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..analysis.codes import CODES

from . import compiler_messages

CATALOG_DIR = Path(__file__).with_name("catalog")

_FIELDS = {"recognised_by", "exceptions", "explanation", "fix", "mechanical_fix",
           "before", "after", "references"}


@dataclass(frozen=True)
class CatalogEntry:
    code: str
    title: str  # from the registry
    tier: int | None  # 0-3 from the code's family; None for PLS9xx (running the check)
    severity: str
    hint: str  # the registry's one-line hint
    recognised_by: str
    explanation: str
    fix: str
    exceptions: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()  # its row of the compiler-message table (regular expressions)
    mechanical_fix: str | None = None
    before: str | None = None
    after: str | None = None
    references: tuple[str, ...] = ()  # docs passage ids (see knowledge/docs.py)
    source: str = ""  # the TOML file the entry came from
    line: int = 1


class UnknownCode(KeyError):
    """A code that is neither in the registry nor in the catalog; ``suggestions`` lists close ones."""

    def __init__(self, code: str, suggestions: list[str]) -> None:
        super().__init__(code)
        self.code = code
        self.suggestions = suggestions

    def __str__(self) -> str:
        near = f" Did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        libtpu = ", ".join(compiler_messages.compiler_codes())
        return (f"unknown finding code {self.code!r}.{near} "
                "Codes are PLS0xx (source rules) to PLS9xx; `pallasite explain --list` shows them all"
                + (f" (of libtpu's own codes, explain knows {libtpu})" if libtpu else "") + ".")


class CatalogError(ValueError):
    """A catalog file is malformed (says which file, which table, what is wrong)."""


def catalog_files() -> list[Path]:
    return sorted(CATALOG_DIR.glob("*.toml"))


def _tier(code: str) -> int | None:
    digit = int(code[3]) if len(code) == 6 and code[3].isdigit() else 9
    return digit if digit <= 3 else None


@lru_cache(maxsize=1)
def _load() -> dict[str, CatalogEntry]:
    entries: dict[str, CatalogEntry] = {}
    for path in catalog_files():
        text = path.read_text(encoding="utf-8")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise CatalogError(f"{path}: not valid TOML: {err}") from err
        for code, table in data.items():
            unknown = set(table) - _FIELDS
            if "patterns" in unknown:
                raise CatalogError(f"{path} [{code}]: 'patterns' belong in the one compiler-message table, "
                                   f"{compiler_messages.TABLE_FILE.name} (the checker reads it too)")
            if unknown:
                raise CatalogError(f"{path} [{code}]: unknown keys {sorted(unknown)}; allowed: {sorted(_FIELDS)}")
            for key in ("recognised_by", "explanation", "fix"):
                if not str(table.get(key, "")).strip():
                    raise CatalogError(f"{path} [{code}]: '{key}' is missing or empty")
            if code in entries:
                raise CatalogError(f"{path} [{code}]: duplicate entry (also in {entries[code].source})")
            registered = CODES.get(code)
            match = re.search(rf"^\[{re.escape(code)}\]", text, re.M)
            entries[code] = CatalogEntry(
                code=code,
                title=registered.title if registered else code,
                tier=_tier(code),
                severity=registered.severity if registered else "error",
                hint=registered.hint if registered else "",
                recognised_by=_clean(table["recognised_by"]),
                explanation=_clean(table["explanation"]),
                fix=_clean(table["fix"]),
                exceptions=tuple(table.get("exceptions", ())),
                patterns=_patterns(code, path),
                mechanical_fix=_clean(table["mechanical_fix"]) if table.get("mechanical_fix") else None,
                before=textwrap.dedent(table["before"]).strip("\n") if table.get("before") else None,
                after=textwrap.dedent(table["after"]).strip("\n") if table.get("after") else None,
                references=tuple(table.get("references", ())),
                source=f"knowledge/catalog/{path.name}",
                line=text.count("\n", 0, match.start()) + 1 if match else 1,
            )
    return entries


def _patterns(code: str, path: Path) -> tuple[str, ...]:
    try:
        return compiler_messages.patterns_of(code)
    except compiler_messages.MessageTableError as err:
        raise CatalogError(str(err)) from err


def _clean(text: str) -> str:
    """Join the hard-wrapped lines of a TOML multi-line string into paragraphs."""
    paragraphs = re.split(r"\n\s*\n", text.strip())
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def all_entries() -> list[CatalogEntry]:
    return sorted(_load().values(), key=lambda e: e.code)


def missing_codes() -> list[str]:
    """Registry codes without a catalog entry (the catalog test fails while this is non-empty)."""
    return sorted(set(CODES) - set(_load()))


def entry(code: str) -> CatalogEntry:
    """The entry for ``code`` (case-insensitive, ``201`` means PLS201); UnknownCode if none."""
    name = normalise(code)
    found = _load().get(name)
    if found is None:
        if name in CODES:  # registered but not yet written up: fall back to the registry line
            c = CODES[name]
            return CatalogEntry(name, c.title, _tier(name), c.severity, c.hint,
                                recognised_by="(not yet in the catalog)", explanation=c.hint, fix=c.hint)
        known = sorted(set(CODES) | set(_load()))
        suggestions = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        typo = name[:3] + name[3:].translate(str.maketrans("OIL", "011"))  # PLS2O1 -> PLS201
        if typo in known:
            suggestions = [typo] + [s for s in suggestions if s != typo][:2]
        raise UnknownCode(code, suggestions)
    return found


def normalise(code: str) -> str:
    text = code.strip().upper()
    if text.isdigit():
        text = "PLS" + text.zfill(3)
    return text


_TIER_WORDS = {0: "tier 0 (source rules)", 1: "tier 1 (Pallas TPU lowering)", 2: "tier 2 (TPU compiler, libtpu)",
               3: "tier 3 (TPU interpret mode)", None: "running the check"}


def explain(code: str, *, markdown: bool = False) -> str:
    """The entry as text: title, how it is recognised, explanation, fix, example, references. One of libtpu's
    own error codes (``E1001``, carried inside PLS201's message) is explained as the finding that carries it."""
    libtpu = compiler_messages.compiler_code(code) if re.fullmatch(r"E\d{4}", code.strip().upper()) else None
    if libtpu is not None:
        said = (f"{code.strip().upper()} ({libtpu[1]}) is libtpu's own error code; pallasite reports the error as "
                f"{libtpu[0]}:")
        return said + "\n\n" + explain(libtpu[0], markdown=markdown)
    e = entry(code)
    h = (lambda s: f"**{s}**") if markdown else (lambda s: s.upper())
    fence = "```python\n{}\n```" if markdown else "{}"
    lines = [f"{'### ' if markdown else ''}{e.code}: {e.title}",
             f"*{_TIER_WORDS[e.tier]}, {e.severity}*" if markdown else f"{_TIER_WORDS[e.tier]}, {e.severity}", "",
             e.explanation, "",
             f"{h('How it is recognised')}: {e.recognised_by}", "",
             f"{h('Fix')}: {e.fix}"]
    if e.mechanical_fix:
        lines += ["", f"{h('Quick fix')}: {e.mechanical_fix}"]
    if e.before and e.after:
        body_before = textwrap.indent(e.before, "" if markdown else "    ")
        body_after = textwrap.indent(e.after, "" if markdown else "    ")
        lines += ["", f"{h('Before')}:", fence.format(body_before), f"{h('After')}:", fence.format(body_after)]
    if e.references:
        lines += ["", f"{h('Read more')}: " + ", ".join(e.references)]
    return "\n".join(lines)


def recognise(exception_type: str, message: str, *, tier: int | None = None) -> list[CatalogEntry]:
    """Entries whose rows of the compiler-message table match ``message`` (rows for ``tier`` only,
    when given), best first: the table's order, a family's catch-all (PLS100/200/300) after every
    specific entry. The same ranking gives a check's finding its code (engine/findings/classify.py).
    ``exception_type`` is not used by the table (the message decides); it is kept for callers."""
    try:
        codes = compiler_messages.codes_for(message, tier)
    except compiler_messages.MessageTableError as err:
        raise CatalogError(str(err)) from err
    return [entry(code) for code in codes]

"""Our types <-> lsprotocol types, and code-point columns <-> the client's position encoding.

``Span`` columns count code points; LSP clients count UTF-16 units unless they negotiated
``utf-8``/``utf-32``. Every conversion takes the line texts it refers to and the encoding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from lsprotocol import types as lsp
from pygls.uris import from_fs_path, to_fs_path

from ..analysis.codes import CODES
from ..analysis.types import Finding, Fix, Span
from ..knowledge import catalog

from .shifting import Edit, LineIndex, _BREAK

UTF16, UTF8, UTF32 = "utf-16", "utf-8", "utf-32"

_SEVERITY = {
    "error": lsp.DiagnosticSeverity.Error,
    "warning": lsp.DiagnosticSeverity.Warning,
    "information": lsp.DiagnosticSeverity.Information,
    "hint": lsp.DiagnosticSeverity.Hint,
}


def text_lines(text: str) -> list[str]:
    """The lines of ``text`` without their breaks (a trailing break gives a last empty line)."""
    return _BREAK.split(text)


def _units(char: str, encoding: str) -> int:
    if encoding == UTF32:
        return 1
    code = ord(char)
    if encoding == UTF8:  # by code point, so a lone surrogate (3 bytes as sent) cannot raise
        return 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
    return 2 if code > 0xFFFF else 1


def column_to_client(line: str, column: int, encoding: str = UTF16) -> int:
    """A code-point column of ``line`` in the client's units."""
    if encoding == UTF32:
        return column
    return sum(_units(c, encoding) for c in line[:column]) + max(0, column - len(line))


def column_from_client(line: str, units: int, encoding: str = UTF16) -> int:
    """The client's column (in its units) as a code-point column of ``line`` (clamped to it)."""
    if encoding == UTF32:
        return min(units, len(line))
    seen = 0
    for index, char in enumerate(line):
        if seen >= units:
            return index
        seen += _units(char, encoding)
    return len(line)


def _line(lines: Sequence[str] | LineIndex, index: int) -> str:
    if isinstance(lines, LineIndex):  # a document's lines: found up to ``index`` only
        return lines.line(index)
    return lines[index] if 0 <= index < len(lines) else ""


def span_to_range(span: Span, lines: Sequence[str], encoding: str = UTF16) -> lsp.Range:
    return lsp.Range(
        start=lsp.Position(span.line, column_to_client(_line(lines, span.line), span.column, encoding)),
        end=lsp.Position(span.end_line, column_to_client(_line(lines, span.end_line), span.end_column, encoding)),
    )


def position_from_client(pos: lsp.Position, lines: Sequence[str], encoding: str = UTF16) -> tuple[int, int]:
    return pos.line, column_from_client(_line(lines, pos.line), pos.character, encoding)


def range_to_span(rng: lsp.Range, lines: Sequence[str], encoding: str = UTF16) -> Span:
    line, column = position_from_client(rng.start, lines, encoding)
    end_line, end_column = position_from_client(rng.end, lines, encoding)
    return Span(line, column, end_line, end_column)


def change_to_edit(change: lsp.TextDocumentContentChangeEvent, lines: Sequence[str],
                   encoding: str = UTF16) -> Edit:
    """One didChange content change as an ``Edit`` of the text it applies to (``lines``)."""
    rng = getattr(change, "range", None)
    if rng is None:  # full-text sync: replace everything
        last = len(lines) - 1
        return Edit(Span(0, 0, last, len(lines[last]) if lines else 0), change.text)
    return Edit(range_to_span(rng, lines, encoding), change.text)


def uri_to_path(uri: str) -> str:
    return to_fs_path(uri) or uri


def path_to_uri(path: str) -> str:
    return from_fs_path(str(Path(path))) or path


def _related(finding: Finding, uri: str, lines: Sequence[str], encoding: str) -> list[lsp.DiagnosticRelatedInformation]:
    out = []
    for rel in finding.related:
        if rel.path is None:
            location = lsp.Location(uri, span_to_range(rel.span, lines, encoding))
        else:
            try:
                other = text_lines(Path(rel.path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                other = []
            location = lsp.Location(path_to_uri(rel.path), span_to_range(rel.span, other, encoding))
        out.append(lsp.DiagnosticRelatedInformation(location, rel.message))
    return out


def diagnostic_message(finding: Finding) -> str:
    """The finding's sentence, then the registry's one-line hint (when it adds something)."""
    entry = CODES.get(finding.code)
    if entry is None or entry.hint in finding.message:
        return finding.message
    return f"{finding.message}\nHint: {entry.hint}"


def code_url(code: str) -> str | None:
    """A web page about ``code``, if its catalog entry names one (an http(s) reference), else None.
    Today the catalog's references are ids of offline docs passages, so diagnostics carry no
    ``codeDescription``; hover or ``pallasite.explain`` show the entry instead."""
    try:
        references = catalog.entry(code).references
    except (catalog.UnknownCode, catalog.CatalogError):
        return None
    return next((r for r in references if r.startswith(("https://", "http://"))), None)


def finding_to_diagnostic(finding: Finding, uri: str, lines: Sequence[str], encoding: str = UTF16,
                          version: int | None = None) -> lsp.Diagnostic:
    """One finding as an LSP diagnostic: severity, code, source, hint, related places, and data
    (code, tier, chip, the document ``version`` it was published for, whether it has a fix)."""
    chip = f", {finding.chip}" if finding.chip else ""
    url = code_url(finding.code)
    return lsp.Diagnostic(
        range=span_to_range(finding.span, lines, encoding),
        message=diagnostic_message(finding),
        severity=_SEVERITY.get(finding.severity, lsp.DiagnosticSeverity.Error),
        code=finding.code,
        code_description=lsp.CodeDescription(href=url) if url else None,
        source=f"pallasite tier {finding.tier} ({finding.origin}{chip})",
        related_information=_related(finding, uri, lines, encoding) or None,
        data={"code": finding.code, "tier": finding.tier, "chip": finding.chip, "kernel": finding.kernel,
              "title": CODES[finding.code].title if finding.code in CODES else None,
              "fixable": finding.fix is not None, "detail": finding.detail, "version": version},
    )


def whole_document_edit(uri: str, version: int, old_text: str, new_text: str) -> lsp.TextDocumentEdit:
    """``new_text`` over the whole of ``old_text`` (the document at ``version``), as a versioned edit:
    a client refuses it if the document moved on. The range ends past the last line (LSP lines)."""
    end = lsp.Position(len(text_lines(old_text)), 0)
    return lsp.TextDocumentEdit(text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                                edits=[lsp.TextEdit(lsp.Range(lsp.Position(0, 0), end), new_text)])


def fix_to_document_edit(fix: Fix, uri: str, version: int, lines: Sequence[str],
                         encoding: str = UTF16) -> lsp.TextDocumentEdit:
    """A fix as a versioned edit: clients refuse it if the document moved past ``version``."""
    return lsp.TextDocumentEdit(
        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=[lsp.TextEdit(span_to_range(e.span, lines, encoding), e.new_text) for e in fix.edits],
    )

"""Code actions: a quick fix per finding with a mechanical Fix, "Fix with agent (<provider>)" on
errors (with no provider configured, one "Set up an LLM provider…" instead, which opens the settings
and docs/agents.md: every action offered can run), and "Check now for <chip>".

"Fix with agent" only names a command: the list stays instant, and the work (model calls, checks)
starts when the user chooses it (server/editor/fix_command.py).

Fix edits are versioned (the document version they were computed for): a client whose document
moved on refuses them. A request whose diagnostics came from a version this server never saw
gets no actions at all.
"""

from __future__ import annotations

from typing import Any, Sequence

from lsprotocol import types as lsp

from ...analysis.types import Finding, Span

from .lenses import CHECK_COMMAND

FIX_WITH_AGENT_COMMAND = "pallasite.fixWithAgent"
SET_UP_PROVIDER_COMMAND = "pallasite.setUpProvider"
SET_UP_PROVIDER_TITLE = "Set up an LLM provider…"
from ..lsp_convert import finding_to_diagnostic, fix_to_document_edit


def overlaps(a: Span, b: Span) -> bool:
    """Whether two spans share a position (touching counts: a cursor at a range's end is on it)."""
    return (a.line, a.column) <= (b.end_line, b.end_column) and (b.line, b.column) <= (a.end_line, a.end_column)


def diagnostic_versions(diagnostics: Sequence[lsp.Diagnostic]) -> set[int]:
    """The document versions our diagnostics were published for (kept in their data)."""
    out = set()
    for diag in diagnostics:
        data = diag.data if isinstance(diag.data, dict) else {}
        if isinstance(data.get("version"), int):
            out.add(data["version"])
    return out


def fixable(findings: Sequence[Finding], span: Span) -> list[Finding]:
    return [f for f in findings if f.fix is not None and overlaps(f.span, span)]


def quick_fixes(findings: Sequence[Finding], span: Span, uri: str, version: int, lines: Sequence[str],
                encoding: str) -> list[lsp.CodeAction]:
    out = []
    candidates = fixable(findings, span)
    for finding in candidates:
        edit = fix_to_document_edit(finding.fix, uri, version, lines, encoding)
        out.append(lsp.CodeAction(
            title=f"{finding.fix.title} ({finding.code})",
            kind=lsp.CodeActionKind.QuickFix,
            diagnostics=[finding_to_diagnostic(finding, uri, lines, encoding)],
            edit=lsp.WorkspaceEdit(document_changes=[edit]),
            is_preferred=len(candidates) == 1,
        ))
    return out


def agent_fix_actions(findings: Sequence[Finding], span: Span, uri: str, version: int,
                      provider: str | None) -> list[lsp.CodeAction]:
    """One "Fix with agent (<provider>)" for the errors under the cursor (their first line); with no
    provider configured, one "Set up an LLM provider…" (a fix that would only fail is not offered)."""
    errors = [f for f in findings if f.severity == "error" and overlaps(f.span, span)]
    if not errors:
        return []
    if not provider:
        return [lsp.CodeAction(
            title=SET_UP_PROVIDER_TITLE,
            kind=lsp.CodeActionKind.QuickFix,
            command=lsp.Command(title=SET_UP_PROVIDER_TITLE, command=SET_UP_PROVIDER_COMMAND, arguments=[{"uri": uri}]),
        )]
    line = min(f.span.line for f in errors)
    title = f"Fix with agent ({provider})"
    return [lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        command=lsp.Command(title=title, command=FIX_WITH_AGENT_COMMAND,
                            arguments=[{"uri": uri, "version": version, "line": line}]),
    )]


def check_action(uri: str, chip: str) -> lsp.CodeAction:
    return lsp.CodeAction(
        title=f"Check now for {chip}",
        kind=lsp.CodeActionKind.Source,
        command=lsp.Command(title=f"Check now for {chip}", command=CHECK_COMMAND, arguments=[{"uri": uri}]),
    )


def actions_for(findings: Sequence[Finding], span: Span, uri: str, version: int, lines: Sequence[str],
                encoding: str, chip: str, only: Sequence[str] | None, seen: set[int],
                context_diagnostics: Sequence[lsp.Diagnostic], agent: str | None = None) -> list[lsp.CodeAction]:
    """All actions for a range, or none when the client's diagnostics are for an unseen version."""
    if diagnostic_versions(context_diagnostics) - seen:
        return []
    out: list[Any] = []
    wants = lambda kind: not only or any(kind == k or kind.startswith(k + ".") for k in only)  # noqa: E731
    if wants(lsp.CodeActionKind.QuickFix):
        out.extend(quick_fixes(findings, span, uri, version, lines, encoding))
        out.extend(agent_fix_actions(findings, span, uri, version, agent))
    if wants(lsp.CodeActionKind.Source):
        out.append(check_action(uri, chip))
    return out

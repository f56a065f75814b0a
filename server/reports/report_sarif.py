"""`pallasite check --format sarif`: the check's findings as SARIF 2.1.0, for code scanning.

One run of one tool (``pallasite``); its rules are every finding code of ``analysis/codes.py`` (id,
title, hint, default level); each finding is a result with its rule, level, message, the location of
its span and its related places. Paths are relative to the folder the check ran in (``SRCROOT``)
where they lie under it, else absolute ``file:`` URIs. Levels: error and warning as they are,
information and hint are SARIF's ``note``. Columns are 1-based code points, ``endColumn`` exclusive,
as SARIF counts them. File-level notes (a tier skipped, a limit hit) are the invocation's
notifications. A rendering only: the findings are the ones the text and JSON formats print.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

from ...analysis.codes import CODES
from ...analysis.types import FileReport, Finding, Span

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION = "2.1.0"
_LEVEL = {"error": "error", "warning": "warning", "information": "note", "hint": "note"}
_ROOT = "SRCROOT"


def to_sarif(reports: Sequence[FileReport], *, target: str, tiers: Sequence[int], root: str | Path | None = None,
             exit_code: int | None = None) -> dict[str, Any]:
    """The SARIF log of one check; ``root``: the folder relative paths start from (default: the current one)."""
    from ... import __version__

    base = Path(root or Path.cwd()).resolve()
    rule_ids = list(CODES)
    index = {code: i for i, code in enumerate(rule_ids)}
    results = [_result(f, report.path, base, index) for report in reports for f in report.findings]
    notes = [{"level": "note", "message": {"text": note},
              "locations": [{"physicalLocation": {"artifactLocation": _artifact(report.path, base)}}]}
             for report in reports for note in report.notes]
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if exit_code is not None:
        invocation["exitCode"] = exit_code
    if notes:
        invocation["toolExecutionNotifications"] = notes
    return {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [{
            "tool": {"driver": {"name": "pallasite", "version": __version__, "semanticVersion": __version__,
                                "rules": [_rule(CODES[c]) for c in rule_ids]}},
            "originalUriBaseIds": {_ROOT: {"uri": base.as_uri() + "/"}},
            "invocations": [invocation],
            "results": results,
            "properties": {"target": target, "tiers": list(tiers)},
        }],
    }


def to_sarif_text(reports: Sequence[FileReport], **kw: Any) -> str:
    return json.dumps(to_sarif(reports, **kw), indent=2)


def _rule(code: Any) -> dict[str, Any]:
    return {"id": code.code, "name": code.code, "shortDescription": {"text": code.title},
            "help": {"text": code.hint},
            "defaultConfiguration": {"level": _LEVEL.get(code.severity, "warning")}}


def _result(finding: Finding, path: str, base: Path, index: dict[str, int]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "level": _LEVEL.get(finding.severity, "warning"),
        "message": {"text": finding.message},
        "locations": [_location(finding.path or path, finding.span, base)],
    }
    if finding.code in index:
        result["ruleIndex"] = index[finding.code]
    if finding.related:
        result["relatedLocations"] = [
            {"id": i, **_location(r.path or finding.path or path, r.span, base), "message": {"text": r.message}}
            for i, r in enumerate(finding.related)]
    result["properties"] = {"tier": finding.tier, "origin": finding.origin, "chip": finding.chip,
                            "kernel": finding.kernel}
    return result


def _location(path: str, span: Span, base: Path) -> dict[str, Any]:
    return {"physicalLocation": {"artifactLocation": _artifact(path, base), "region": _region(span)}}


def _region(span: Span) -> dict[str, int]:
    end_line, end_column = (span.end_line, span.end_column) if (span.end_line, span.end_column) >= (
        span.line, span.column) else (span.line, span.column)
    return {"startLine": span.line + 1, "startColumn": span.column + 1, "endLine": end_line + 1,
            "endColumn": end_column + 1}


def _artifact(path: str, base: Path) -> dict[str, str]:
    absolute = Path(path).resolve()
    try:
        relative = absolute.relative_to(base)
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": _ROOT}

"""`pallasite check` output: compiler-style text, and the versioned JSON other tools depend on.

JSON schema (version 1; lines and columns 1-based, columns in code points, ``end_column``
exclusive; ``severity`` is one of error, warning, information — a finding whose severity was set
to "hint" is reported as information)::

    {"version": 1, "target": "v6e", "tiers": [0, 1, 2],
     "files": [{"path": str,
                "findings": [{"line", "column", "end_line", "end_column", "severity", "code",
                              "title", "message", "hint", "tier", "origin", "chip",
                              "fix": null | {"title", "edits": [{"line", "column", "end_line",
                                                                "end_column", "new_text"}]},
                              "related": [{"path", "line", "column", "end_line", "end_column",
                                           "message"}],
                              "detail": null | str}],
                "kernels": [{"name", "line", "tiers": {"0": "ok" | "error" | "skipped: ..." | "not run"}}],
                "notes": [str],
                "tiers_ran": [int],               # tiers that gave some kernel a verdict
                "not_fully_checked": [str],       # why not ([] when fully checked)
                "skipped": null | str,            # why nothing applied (a file without Pallas)
                "compile": null | {"ok": true | false | null, "chip", "tiers_run", "tiers_skipped",
                                   "kernels", "why", "evidence", "checked", "status"},  # the Verdict's compile part
                "compile_text": null | str}],     # "compiled for v5e (tiers 0,1,2)" | "not compiled for v5e: <why>"
                                                  # | "not checked: <why>"
     "summary": {"files": int, "errors": int, "warnings": int, "information": int,
                 "not_fully_checked": int, "skipped": int, "compiled": int,
                 "wall_s": null | float}}         # the whole command's wall time

New keys may be added within version 1; renaming or removing one bumps the version.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence

from ...analysis.codes import CODES, COULD_NOT_CHECK
from ...analysis.types import FileReport, Finding, Span, TextEdit
from ...analysis.verdict import COMPILE_TIER, TIER0_NO_SITE, TIER0_NOT_APPLICABLE, CompileResult, compile_result
from ...engine.findings.reach import NOT_REACHED

JSON_VERSION = 1


def _range(span: Span) -> dict[str, int]:
    return {
        "line": span.line + 1,
        "column": span.column + 1,
        "end_line": span.end_line + 1,
        "end_column": span.end_column + 1,
    }


def cli_severity(finding: Finding) -> str:
    """The severity the CLI reports: LSP's "hint" has no place in the JSON v1 enum."""
    return "information" if finding.severity == "hint" else finding.severity


def finding_json(finding: Finding, path: str) -> dict:
    entry = CODES.get(finding.code)
    return {
        **_range(finding.span),
        "severity": cli_severity(finding),
        "code": finding.code,
        "title": entry.title if entry else None,
        "message": finding.message,
        "hint": entry.hint if entry else None,
        "tier": finding.tier,
        "origin": finding.origin,
        "chip": finding.chip,
        "kernel": finding.kernel,
        "fix": None
        if finding.fix is None
        else {
            "title": finding.fix.title,
            "edits": [edit_json(e) for e in finding.fix.edits],
        },
        "related": [
            {"path": r.path or finding.path or path, **_range(r.span), "message": r.message}
            for r in finding.related
        ],
        "detail": finding.detail,
    }


def edit_json(edit: TextEdit) -> dict:
    """A text edit as the JSON documents give it: 1-based line and column, exclusive end, the new text."""
    return {**_range(edit.span), "new_text": edit.new_text}


# "Could not check" outcomes: warnings (or information) that mean a file was not fully checked.
_CHECKED = ("ok", "error")
_NOT_APPLICABLE = ("skipped: GPU kernel", TIER0_NO_SITE)


def tiers_ran(report: FileReport) -> list[int]:
    """The tiers that gave a verdict (ok or error) for at least one kernel of the file."""
    return sorted({t for k in report.kernels for t, state in k.tiers if state in _CHECKED})


def not_checked(report: FileReport, tiers: Sequence[int]) -> list[str]:
    """Why the file was not fully checked for ``tiers`` ([] when it was): requested tiers that gave
    no verdict for some kernel (a tier skipped because an earlier one failed counts as checked: the
    error is reported), and "could not check" findings."""
    reasons: dict[str, None] = {}
    if report.skipped:
        return []
    ran = set(tiers_ran(report))
    kernels: dict[str, list[str]] = {}  # each reason names the kernels it is about
    for kernel in report.kernels:
        states = dict(kernel.tiers)
        for tier in tiers:
            state = states.get(tier, "not run")
            if state in _CHECKED or state in _NOT_APPLICABLE or (tier == 0 and state.startswith(TIER0_NOT_APPLICABLE)) or (state.startswith("skipped:") and "failed" in state):
                continue
            if state == NOT_REACHED and tier in ran:
                continue  # the task never calls it, and the tier checked every kernel the task does call
            kernels.setdefault(f"tier {tier} {state}", []).append(kernel.name)
    for why, names in kernels.items():
        reasons[f"{why} (kernel{'s' if len(names) > 1 else ''} {', '.join(names)})"] = None
    for finding in report.findings:
        if finding.code in COULD_NOT_CHECK:
            reasons[f"{finding.code} at line {finding.span.line + 1}"] = None
    return list(reasons)


def not_reached(report: FileReport) -> list[str]:
    """The names of the file's kernels its task never calls (their compiler tiers did not run)."""
    return [k.name for k in report.kernels if any(state == NOT_REACHED for _, state in k.tiers)]


def exit_status(reports: Sequence[FileReport], tiers: Sequence[int], *, strict: bool = False) -> int:
    """1 when errors were found (or, with ``strict``, when a file was not fully checked), else 0."""
    if summary(reports)["error"]:
        return 1
    if strict and any(not_checked(r, tiers) for r in reports):
        return 1
    return 0


def compiled_for(report: FileReport, tiers: Sequence[int], target: str) -> CompileResult | None:
    """The file's compile result, as every command reads a checker report (analysis/verdict.compile_result);
    None for a file without Pallas."""
    if report.skipped:
        return None
    return compile_result(report, tuple(t for t in tiers if t <= COMPILE_TIER), target)


def compile_line(result: CompileResult, target: str) -> str:
    """"compiled for v5e (tiers 0,1,2)", "not compiled for v5e: <why>" (an error, or tier 2 not run and
    passed: the why says which), or "not checked: <why>" (a limit or a crash stopped the check)."""
    if result.ok or not result.checked:
        return result.text()
    return f"not compiled for {target}: {result.why_text()}"


def summary(reports: Sequence[FileReport]) -> Counter:
    counts: Counter = Counter()
    for report in reports:
        counts.update(cli_severity(f) for f in report.findings)
    return counts


def to_json_text(reports: Sequence[FileReport], *, target: str, tiers: Sequence[int],
                 wall_s: float | None = None) -> str:
    counts = summary(reports)
    doc = {
        "version": JSON_VERSION,
        "target": target,
        "tiers": list(tiers),
        "files": [file_json(r, tiers=tiers, target=target) for r in reports],
        "summary": {
            "files": len(reports),
            "errors": counts["error"],
            "warnings": counts["warning"],
            "information": counts["information"],
            "not_fully_checked": sum(1 for r in reports if not_checked(r, tiers)),
            "skipped": sum(1 for r in reports if r.skipped),
            "compiled": _compiled_count(reports, tiers, target),
            "wall_s": round(wall_s, 2) if wall_s is not None else None,
        },
    }
    return json.dumps(doc, indent=2)


def file_json(report: FileReport, *, tiers: Sequence[int], target: str) -> dict:
    """One file's entry of the JSON document (the schema above): what `pallasite check --format json` and
    the MCP server's ``check`` tool both give."""
    return {
        "path": report.path,
        "findings": [finding_json(f, report.path) for f in report.findings],
        "kernels": [
            {"name": k.name, "line": k.span.line + 1, "tiers": {str(t): v for t, v in k.tiers}}
            for k in report.kernels
        ],
        "notes": list(report.notes),
        "tiers_ran": tiers_ran(report),
        "not_fully_checked": not_checked(report, tiers),
        "skipped": report.skipped,
        **_compile_json(report, tiers, target),
    }


def _compile_json(report: FileReport, tiers: Sequence[int], target: str) -> dict:
    result = compiled_for(report, tiers, target)
    return {"compile": result.to_json() if result else None,
            "compile_text": compile_line(result, target) if result else None}


def _compiled_count(reports: Sequence[FileReport], tiers: Sequence[int], target: str) -> int:
    return sum(1 for r in reports if (c := compiled_for(r, tiers, target)) is not None and c.ok)


def finding_text(finding: Finding, path: str, *, details: bool = False) -> str:
    """``path:line:col: severity[CODE]: message`` plus indented hint, related places and fix
    (and, with ``details``, the compiler's full output, indented)."""
    s = finding.span
    where = f"{finding.path or path}:{s.line + 1}:{s.column + 1}"
    tag = f" (tier {finding.tier}, {finding.origin}{', ' + finding.chip if finding.chip else ''})"
    lines = [f"{where}: {cli_severity(finding)}[{finding.code}]: {finding.message}{tag}"]
    for rel in finding.related:
        lines.append(f"  note: {rel.path or finding.path or path}:{rel.span.line + 1}:{rel.span.column + 1}: {rel.message}")
    entry = CODES.get(finding.code)
    if entry:
        lines.append(f"  help: {entry.hint}")
    if finding.fix:
        lines.append(f"  fix: {finding.fix.title}")
    if details and finding.detail:
        lines.append("  detail:")
        lines.extend("    " + line for line in finding.detail.rstrip().splitlines())
    return "\n".join(lines)


def to_text(reports: Sequence[FileReport], *, target: str, tiers: Sequence[int], details: bool = False,
            verbose: bool = False, wall_s: float | None = None) -> str:
    """Compiler-style text. Quiet by default: a clean, fully checked file prints nothing; a file
    with findings prints its errors and warnings; a file not fully checked says which tiers ran and
    why the others did not. ``verbose`` adds information findings, notes and a line per file."""
    out = [line for report in reports
           for line in file_lines(report, tiers=tiers, details=details, verbose=verbose, target=target)]
    out.append(summary_line(reports, target=target, tiers=tiers, wall_s=wall_s))
    return "\n".join(out)


def file_lines(report: FileReport, *, tiers: Sequence[int], details: bool = False, verbose: bool = False,
               target: str = "") -> list[str]:
    """One file's part of the text output (``to_text``): nothing for a clean, fully checked file. A file with
    an error or not fully checked (and every file with ``verbose``) ends with its compile verdict for
    ``target`` in the one vocabulary ("compiled for v5e (tiers 0,1,2)", "not compiled for v5e: <why>")."""
    if report.skipped:
        return [f"{report.path}: skipped: {report.skipped}"] if verbose else []
    out = [f"{report.path}: note: {note}" for note in report.notes] if verbose else []
    shown = [f for f in report.findings if verbose or cli_severity(f) in ("error", "warning")]
    for finding in sorted(shown, key=lambda f: (f.span.line, f.span.column, f.code)):
        out.append(finding_text(finding, report.path, details=details))
    missing = not_checked(report, tiers)
    if report.kernels and (missing or verbose):
        ran = tiers_ran(report)
        status = f"tier{'s' if len(ran) != 1 else ''} {','.join(map(str, ran))} ran" if ran else "no tier gave a verdict"
        out.append(f"{report.path}: {status}" + (f"; not fully checked: {'; '.join(missing)}" if missing else ""))
        unreached = not_reached(report)
        if verbose and unreached:
            out.append(f"{report.path}: note: the task never calls {', '.join(unreached)}: tier 0 only checked "
                       f"{'them' if len(unreached) > 1 else 'it'}")
    errors = any(cli_severity(f) == "error" for f in report.findings)
    if target and (report.kernels and (missing or errors) or verbose):  # verbose: a file without a kernel too
        result = compiled_for(report, tiers, target)
        if result is not None:
            out.append(f"{report.path}: {compile_line(result, target)}")
    return out


def summary_line(reports: Sequence[FileReport], *, target: str, tiers: Sequence[int], wall_s: float | None = None) -> str:
    """The last line: files checked, findings by severity, files not fully checked, files skipped, wall time."""
    counts = summary(reports)
    tier_text = ",".join(str(t) for t in tiers)
    incomplete = sum(1 for r in reports if not_checked(r, tiers))
    skipped = sum(1 for r in reports if r.skipped)
    compiled = (f"; {_compiled_count(reports, tiers, target)} compiled for {target}"
                if COMPILE_TIER in tiers and len(reports) > skipped else "")
    return (
        f"{len(reports) - skipped} file(s) checked for {target}, tiers {tier_text}"
        + (f" in {wall_s:.1f} s" if wall_s is not None else "")
        + f": {counts['error']} error(s), {counts['warning']} warning(s), {counts['information']} information finding(s)"
        + compiled
        + (f"; {incomplete} file(s) not fully checked (--strict fails on these)" if incomplete else "")
        + (f"; {skipped} file(s) without Pallas skipped" if skipped else "")
    )

"""The locate step, client side: a tier-3 failure's finding moved to the statement that makes it, with the
edit the worker verified as a quick fix (never imports jax).

After tier 3 found an entry's outputs wrong, NaN or unwritten (PLS304 / PLS303 errors), or its run failing
with an error raised at a statement (PLS302: an out-of-bounds read or DMA; PLS300: a deadlocked wait or
another error of the kernel), the checker asks
the worker's ``locate`` op (``runner/tier3/locate_step.py``) to try small mechanical edits of the statements
that reach them, each run through tier 3 at its reduced size within a time budget. This module turns the
answer into findings:

- **fixed**: the entry's tier-3 finding lands at the edited expression, its message saying what the edit
  is and that it was verified, with the edit as a ``Fix`` titled "verified: with this change the kernel
  matches the reference on N fresh input sets"; where tier 3 saw the outputs wrong (or the run fail) is a
  related place. For a failure an edit must make the run succeed *and* its outputs match; an entry without a
  reference gets a fix titled "runs without the error: ..." (the run succeeds with every output written,
  its values unchecked), never "verified";
- **not found**: the finding stays where tier 3 put it when that is a statement of its own (an init, a
  store), else it moves to the most suspicious statement; its message lists the edits tried;
- **skipped**: a note says why.

``wrong_output_entries`` picks the entries to ask about; ``locate_report`` asks and rewrites a report;
``apply_located`` is the pure part.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

from ...analysis.types import NAN_COMPUTED, FileReport, Finding, Fix, Related, Span, TextEdit
from ...wire.messages import LocatedEntry, LocateParams, LocateResult, SourceEdit

from ..sources import sources_for
from .agreement import folded_codes

LOCATE_CODES = ("PLS303", "PLS304")  # outputs wrong, NaN or unwritten
FAILURE_CODES = ("PLS300", "PLS302")  # the run failed: an error of the kernel, an out-of-bounds read or DMA
FRESH_SETS = 3
TRIED_IN_MESSAGE = 6


def wrong_output_entries(by_entry: Mapping[str, Sequence[Finding]]) -> dict[str, int | None]:
    """The entries with a tier-3 error about their outputs (wrong, NaN, unwritten) or their run (a failure):
    what the step locates, each with the 1-based line tier 3 said its run failed at, else the line it placed
    the wrong outputs at (a "parallel" entry that carries a reduction, an init's place, the pallas_call)."""
    out: dict[str, int | None] = {}
    for name, found in by_entry.items():
        mine = [f for f in found if _is_wrong_output(f)]
        if mine:
            failed = [f for f in mine if f.code in FAILURE_CODES]
            out[name] = (failed or mine)[0].span.line + 1
    return out


def uninitialized_entries(by_entry: Mapping[str, Sequence[Finding]]) -> set[str]:
    """The entries whose tier-3 error says their NaN outputs were computed from memory never written (an
    accumulator not reset on the first step): the step tries an init's edits first."""
    return {name for name, found in by_entry.items() if any(_is_wrong_output(f) and NAN_COMPUTED in f.message
                                                            for f in found)}


@dataclass
class WrongOutputs:
    """What a check's tier-3 runs found to locate: entry -> the line tier 3 said it at (``wrong_output_entries``),
    and the entries whose NaN was computed from memory never written."""

    lines: dict[str, int | None] = field(default_factory=dict)
    uninitialized: set[str] = field(default_factory=set)

    def add(self, by_entry: Mapping[str, Sequence[Finding]]) -> None:
        self.lines.update(wrong_output_entries(by_entry))
        self.uninitialized |= uninitialized_entries(by_entry)

    def into(self, report: FileReport) -> FileReport:
        return dataclasses.replace(report, wrong_outputs=tuple(self.lines), failed_at=tuple(
            (name, line) for name, line in self.lines.items() if line is not None),
            uninitialized=tuple(sorted(self.uninitialized & set(self.lines))))


def _is_wrong_output(f: Finding) -> bool:
    return f.tier == 3 and f.code in LOCATE_CODES + FAILURE_CODES and f.severity == "error"


def timeout_for(budget_s: float, entries: int) -> float:
    """The locate request's time limit: its budget, the baseline and verification runs around it."""
    return budget_s + 60.0 + 30.0 * max(1, entries)


async def locate_report(request: Callable[[LocateParams, float], Awaitable[Any]], report: FileReport, text: str,
                        target: str, budget_s: float, site_lines: frozenset[int] = frozenset()) -> FileReport:
    """``report`` with its wrong-output findings moved where the locate step says (``request(params,
    timeout_s)`` -> an engine ``Reply``); unchanged but for a note when the request fails."""
    entries = report.wrong_outputs
    if not entries:
        return report
    params = LocateParams(source=sources_for(report.path, text), chip=target, entries=tuple(entries),
                          budget_s=float(budget_s), fresh_sets=FRESH_SETS, failed_at=report.failed_at,
                          uninitialized=report.uninitialized)
    reply = await request(params, timeout_for(budget_s, len(entries)))
    if getattr(reply, "status", None) != "ok" or not isinstance(reply.result, LocateResult):
        why = getattr(reply, "message", "") or getattr(reply, "status", "no reply")
        return dataclasses.replace(report, notes=report.notes + (
            f"locate step: stopped before it answered ({why}); the tier-3 findings stay where tier 3 put them",))
    return apply_located(report, reply.result, text, site_lines)


def apply_located(report: FileReport, result: LocateResult, text: str,
                  site_lines: frozenset[int] = frozenset()) -> FileReport:
    """The pure part of ``locate_report``: each entry's answer applied to the report's findings.
    ``site_lines``: 0-based lines of the file's ``pallas_call``s (a finding there is not yet at a statement)."""
    findings = list(report.findings)
    notes = list(report.notes)
    several = len(result.entries) > 1
    for answer in result.entries:
        index = next((i for i, f in enumerate(findings) if _is_wrong_output(f) and not _located(f)
                      and (not several or _mine(f, answer))), None)
        if index is None and answer.state == "fixed" and answer.fix is not None:
            host = _folded_into(findings, answer.fix)
            if host is not None:  # tier 3's finding was folded into one of tier 0's at the same place
                findings[host] = hosted_fix(findings[host], answer, answer.fix)
                notes.append(_timing_note(answer))
                continue
        if answer.state == "skipped" or index is None:
            if answer.reason:
                notes.append(f"locate step for {answer.entry}: {answer.state}: {answer.reason}")
            continue
        if answer.state == "fixed" and answer.fix is not None:
            findings[index] = fixed_finding(findings[index], answer, answer.fix)
        elif answer.state == "not_found":
            findings[index] = suspect_finding(findings[index], answer, site_lines)
        notes.append(_timing_note(answer))
    findings.sort(key=lambda f: (f.span.line, f.span.column, f.tier, f.code))
    return dataclasses.replace(report, findings=tuple(findings), notes=tuple(dict.fromkeys(notes)))


def _mine(finding: Finding, answer: LocatedEntry) -> bool:
    return not answer.kernel or finding.kernel in (None, answer.kernel)


def _located(finding: Finding) -> bool:
    return any(r.message.startswith((SAW_IT, SAW_FAIL)) for r in finding.related)


SAW_IT = "tier 3 saw the outputs wrong here"
SAW_FAIL = "tier 3 saw the run fail here"


def _span(edit: SourceEdit) -> Span:
    return Span(edit.line - 1, edit.column, edit.end_line - 1, edit.end_column)


def fixed_finding(finding: Finding, answer: LocatedEntry, edit: SourceEdit) -> Finding:
    """The finding at the edited expression, with the verified edit as its fix."""
    told, fix = _verified_edit(finding, answer, edit)
    saw = SAW_FAIL if finding.code in FAILURE_CODES else SAW_IT
    here = Related(finding.span, f"{saw} ({answer.problem})" if answer.problem else saw)
    return dataclasses.replace(finding, span=_span(edit), message=finding.message + told, fix=fix,
                               related=(here, *finding.related))


def hosted_fix(finding: Finding, answer: LocatedEntry, edit: SourceEdit) -> Finding:
    """``finding`` (where it is) with the locate step's verified edit as its fix and said in its message."""
    told, fix = _verified_edit(finding, answer, edit)
    return dataclasses.replace(finding, message=finding.message.rstrip(".") + told, fix=fix)


def _verified_edit(finding: Finding, answer: LocatedEntry, edit: SourceEdit) -> tuple[str, Fix]:
    """What the message adds (". The statement at line N makes them wrong: ...") and the edit as a ``Fix``."""
    sets = answer.verified_sets
    edge = (f", {answer.edge_sets} of them within twice the tolerance (a few elements past it)"
            if answer.edge_sets else "")
    failed = finding.code in FAILURE_CODES
    change = f"with {edit.what}" if "\n" in edit.new_text else f"with `{edit.new_text}` in place of `{edit.old_text}`"
    told = (f". The statement at line {edit.line} makes "
            + ("the run fail" if failed else "them wrong")
            + f": {change} the kernel "
            + ("runs without this error and " if failed else "")
            + (f"matches the reference at tier 3's inputs and on {sets} fresh input set(s){edge}" if answer.compared else
               f"writes every output at tier 3's inputs and on {sets} fresh input set(s) (the entry has no "
               "reference: the values are not checked)")
            + f" ({answer.shapes}; CPU interpret mode, the locate step)")
    title = (f"verified: with this change the kernel matches the reference on {sets} fresh input sets{edge} "
             f"({edit.what})"
             if answer.compared else
             f"runs without the error: with this change the kernel runs on {sets} fresh input sets (no reference to "
             f"compare its values with; {edit.what})")
    return told, Fix(title=title, edits=(TextEdit(_span(edit), edit.new_text),))


def _folded_into(findings: list[Finding], edit: SourceEdit) -> int | None:
    """The finding tier 3's wrong-output (or failure) finding was folded into when it agreed with one already
    placed (``agreement.merge_agreeing``: an uninitialized scratch, PLS018); the one nearest the edit."""
    line = edit.line - 1
    hosts = [i for i, f in enumerate(findings) if f.tier != 3 and folded_codes(f) & {*LOCATE_CODES, *FAILURE_CODES}]
    return min(hosts, key=lambda i: abs(findings[i].span.line - line)) if hosts else None


def suspect_finding(finding: Finding, answer: LocatedEntry, site_lines: frozenset[int]) -> Finding:
    """No edit fixed it: the edits tried in the message; at the most suspicious statement unless tier 3
    already named a statement of its own."""
    tried = "; ".join(f"line {e.line}: {e.what}" for e in answer.tried[:TRIED_IN_MESSAGE])
    more = f" and {answer.tried_count - TRIED_IN_MESSAGE} more" if answer.tried_count > TRIED_IN_MESSAGE else ""
    said = f"{finding.message}. The locate step tried {answer.tried_count} mechanical edit(s) of the statements " \
           f"that reach these outputs, none of which makes them match ({tried}{more})"
    suspect = answer.suspect
    at_call = finding.span.line in site_lines or not site_lines
    if suspect is None or not at_call:
        return dataclasses.replace(finding, message=said + ".")
    said += f"; the most suspicious statement is line {suspect.line} ({suspect.what} changed the outputs the most)."
    here = Related(finding.span, SAW_IT)
    return dataclasses.replace(finding, span=_span(suspect), message=said, related=(here, *finding.related))


def _timing_note(answer: LocatedEntry) -> str:
    what = {"fixed": f"found the statement (line {answer.fix.line if answer.fix else '?'}) with a verified fix",
            "not_found": "found no single edit that fixes it"}.get(answer.state, answer.state)
    return (f"locate step for {answer.entry}: {what} after {answer.tried_count} edit(s) in {answer.seconds:.1f} s "
            f"(CPU interpret mode at {answer.shapes})")

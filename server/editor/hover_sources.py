"""Where hover content comes from: the document's analysis, the task's element type, the chip
table cache (the scoped VMEM limit), the last check of this session and the results store (read
through the engine's open connection, ``Engine.stored_checks``).

Reading files (never importing jax) lives here; the text itself is built by hover.py.
"""

from __future__ import annotations

import re
import time
from typing import Any

from ...engine.findings import never_ran

from . import hover, hover_facts, task_shapes, timing_lsp
from ..documents import DocumentSnapshot
from ..session import Session


def hover_content(session: Session, doc: DocumentSnapshot, line: int, column: int) -> tuple[str, Any] | None:
    """(markdown, span) for what is at (line, column) of a kernel file, or None: the code's own
    hover, then the error catalog's explanation of each diagnostic there."""
    found = hover.with_explanations(code_hover(session, doc, line, column),
                                    hover.findings_at(doc.findings(), line, column))
    return hover.with_never_ran(found, never_ran.range_at(doc.findings(), line), line)


def code_hover(session: Session, doc: DocumentSnapshot, line: int, column: int) -> tuple[str, Any] | None:
    """(markdown, span) for the pallas_call, BlockSpec, grid or kernel def at (line, column)."""
    analysis = doc.analysis
    dtype, dtype_source = task_dtype(doc.text, analysis)
    chip = chip_limits(session.settings.target, session.engine.chip_table)
    found = (hover_facts.traced_hover_at(analysis.sites, line, column, chip, traced_calls(doc))  # what the run learned
             or hover.hover_at(analysis.sites, line, column, chip, dtype, dtype_source, task_grids(doc.text, analysis)))
    if found is not None:
        return found
    name = hover.kernel_at(analysis.sites, line, column)
    if name is None:
        return None
    site = next(s for s in analysis.sites if s.kernel_name == name)
    measured = timing_lsp.hover_section(session, doc.path, {name, *(s.enclosing_function for s in analysis.sites
                                                                     if s.kernel_name == name and s.enclosing_function)})
    return (hover.kernel_hover(name, kernel_results(session, doc, name), compiled_words(session, doc)) + measured,
            site.kernel_def_span)


def traced_calls(doc: DocumentSnapshot) -> dict[Any, tuple[Any, str]]:
    """Site span -> (the last check's ``TracedCall`` for it, where it came from), for the sites the
    check's run made (engine/findings/reach.traced_calls; hover_facts.py words them); none from a check for
    another chip than the document's target (its VMEM figures are that chip's)."""
    report, target = doc.report, getattr(doc.settings, "target", doc.report_chip)
    if report is None or not report.calls or doc.analysis is None or doc.report_chip != target:
        return {}
    edited = doc.report_version is not None and doc.report_version != doc.version
    when = time.strftime("%H:%M:%S UTC", time.gmtime(doc.report_time)) if doc.report_time else "?"
    said = f"last check in this session for {doc.report_chip or '?'}, {when}" + ("; edited since" if edited else "")
    out = {}
    for site in doc.analysis.sites:
        call = hover_facts.traced_for(site, report.calls, edited=edited)
        if call is not None:
            out[site.span] = (call, said)
    return out


def compiled_words(session: Session, doc: DocumentSnapshot) -> str:
    """The file's compile verdict at its last check, as `pallasite check` prints it (server/reports/report_format.py),
    judged with the tiers its folder's settings ask for (the report has tier 0 filled in: server/checks.as_check)."""
    from ..reports.report_format import compile_line, compiled_for

    if doc.report is None or not doc.report_chip or not doc.report.kernels:
        return ""
    result = compiled_for(doc.report, session.settings_for(doc.path).tiers, doc.report_chip)
    return compile_line(result, doc.report_chip) if result is not None else ""


def task_dtype(text: str, analysis: Any) -> tuple[str | None, str]:
    """The element type of the task's example inputs, when they name exactly one."""
    for task in getattr(analysis, "tasks", ()) or ():
        if not task.inputs:
            continue
        match = re.search(rf"^def {re.escape(task.inputs)}\(.*?(?=^\S|\Z)", text, re.S | re.M)
        if match:
            found = hover.dtypes_in(match.group(0))
            if len(found) == 1:
                return found[0], f"from {task.inputs}()"
    return None, ""


def task_grids(text: str, analysis: Any) -> dict[Any, tuple[int, ...]]:
    """Site span -> grid at the task's example shapes, for sites in the task's entry whose grid
    is not static in the source."""
    out = {}
    for task in getattr(analysis, "tasks", ()) or ():
        for site in analysis.sites:
            if site.enclosing_function == task.entry and site.grid is not None:
                value = task_shapes.grid_at_inputs(text, site.grid, task.entry, task.inputs)
                if value is not None:
                    out[site.span] = value
    return out


def chip_limits(target: str, from_worker: list[Any] | None = None) -> hover.ChipLimits:
    """The chip's scoped VMEM limit from the cached chip table, else from the table the warm check
    worker sent this session (``from_worker``); never imports jax."""
    try:
        from ...engine.chip_table import cached as cached_table

        cached = cached_table() or []
    except Exception:
        cached = []
    for specs, where in ((cached, "the chip table cache"), (from_worker or [], "the check worker's chip table")):
        for spec in specs:
            if spec.name == target and spec.scoped_vmem_limit_bytes:
                return hover.ChipLimits(target, spec.scoped_vmem_limit_bytes, spec.vmem_bytes,
                                        f"{where} ({spec.scoped_vmem_source})")
    return hover.ChipLimits(target)


def kernel_results(session: Session, doc: DocumentSnapshot, name: str) -> list[hover.KernelResult]:
    """The compile results known for a kernel: the last check in this session, then the workspace's
    results store for the (tier, chip) pairs this session has not checked."""
    out: list[hover.KernelResult] = []
    if doc.report is not None and doc.report_time is not None:
        when = time.strftime("%H:%M:%S UTC", time.gmtime(doc.report_time))
        out += hover.verdict_results(doc.report.kernels, name, doc.report_chip or "?",
                                     f"last check in this session, {when}")
    seen = {(r.tier, r.chip) for r in out}
    names = {name, *(s.enclosing_function for s in doc.analysis.sites if s.kernel_name == name)}
    for record in session.engine.stored_checks(doc.path):
        if record.kernel in names and (record.tier, record.chip) not in seen:
            seen.add((record.tier, record.chip))
            codes = sorted({f.code for f in record.findings})
            status = record.status + (f" ({', '.join(codes)})" if codes else "")
            out.append(hover.KernelResult(record.tier, record.chip or "?", status, store_provenance(record)))
    return out


def store_provenance(record: Any) -> str:
    versions = ", ".join(v for v in (f"jax {record.key.jax_version}" if record.key.jax_version else "",
                                     f"libtpu {record.key.libtpu_version}" if record.key.libtpu_version else "",
                                     record.key.backend) if v)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.created))
    return f"results store (.pallasite), {when}, {versions}"

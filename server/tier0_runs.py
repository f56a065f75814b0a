"""Tier 0 (the source rules; executes nothing) of an open document, as plain functions of the session.

``tier0_snapshot`` is a pure function of a text (run here or on the tier-0 thread); its result
becomes a new ``DocumentSnapshot`` of the document (``store_tier0``) only while the document is
still at the version it was computed for. A document over ``check.maxFileMb`` is not analysed
(said once). A failing rule is reported once per document and the last findings are kept.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any, Sequence

from lsprotocol import types as lsp

from ..analysis.source import release_memory
from ..analysis.suppress import apply_suppressions
from ..analysis.types import Finding, Related

from . import tier0_thread

_SURROGATE = re.compile("[\ud800-\udfff]")


def analyzable(text: str) -> str:
    """``text`` with lone surrogates (a client may send ``"\\ud800"``) replaced by U+FFFD: one
    code point for one, so every column stays where it was, and the text encodes as UTF-8."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def analyze(text: str, path: str, target: str, state: Any = None) -> Any:
    """Tier 0 of ``text`` (``state``: the document's ``Tier0State`` when ``text`` is its text)."""
    from ..analysis import tier0
    from ..engine.checker import scoped_vmem

    return tier0.analyze(analyzable(text), path, target=target, scoped_vmem=scoped_vmem(target), state=state)


def analysis_for_check(session: Any, doc: Any) -> Any:
    """The current snapshot's tier-0 analysis, for the checker to take instead of analysing the same
    text again; None when it is not of this text, or not what the checker would compute (another
    target for the document's folder, or a text tier 0 read with lone surrogates replaced)."""
    snapshot = doc.snapshot
    if snapshot.analysis is None or not snapshot.analysed:
        return None
    if session.settings_for(doc.path).target != session.settings.target or analyzable(snapshot.text) != snapshot.text:
        return None
    return snapshot.analysis


def suppress(findings: Sequence[Finding], text: str, overrides: dict[str, str]) -> list[Finding]:
    """Suppression comments and severity overrides (analysis/suppress.py)."""
    return list(apply_suppressions(list(findings), text, dict(overrides)))


def tier0_snapshot(text: str, path: str, target: str, severity: dict[str, str], state: Any = None) -> Any:
    """(analysis, findings to show) of one text, or the exception the rules raised. A plain
    function of its arguments (``state``: the document's ``Tier0State``, which it reads and
    updates), so it can run on the tier-0 thread."""
    try:
        analysis = analyze(text, path, target, state)
        found = suppress(analysis.findings, text, severity)
        return analysis, [with_site_context(f, analysis.sites) for f in found]
    except Exception as exc:  # noqa: BLE001 - reported as data by store_tier0
        return exc


def with_site_context(finding: Finding, sites: Sequence[Any]) -> Finding:
    """Add the pallas_call and the kernel def as related places, when the finding is about a site."""
    related = list(finding.related)
    known = {r.span for r in related}
    for site in sites:
        about = site.span.contains(finding.span.line, finding.span.column) or (
            finding.kernel is not None and finding.kernel == site.kernel_name)
        if not about:
            continue
        if site.call_span not in known and site.call_span != finding.span:
            related.append(Related(site.call_span, f"pallas_call of {site.kernel_name or 'the kernel'}"))
        if site.kernel_def_span is not None and site.kernel_def_span not in known:
            related.append(Related(site.kernel_def_span, f"kernel {site.kernel_name} defined here"))
        break
    return replace(finding, related=tuple(related)) if len(related) != len(finding.related) else finding


def run_tier0(session: Any, doc: Any) -> None:
    """Tier 0 for the document's current text, here and now (in process; executes nothing).
    If the source analysis itself fails, say so once per document and keep the last findings."""
    version = doc.version
    if stopped_for_size(session, doc):
        return
    tier0_thread.freeze_startup()
    with tier0_thread.collector_off():
        result = tier0_snapshot(doc.text, doc.path, session.settings.target, dict(session.settings.severity),
                                doc.tier0_state)
    store_tier0(session, doc, version, result)


def run_tier0_inline(session: Any, doc: Any) -> bool:
    """Small documents: tier 0 now (True). Big ones: False (the caller schedules the background run,
    which publishes)."""
    if len(doc.text) <= tier0_thread.TIER0_INLINE_CHARS:
        run_tier0(session, doc)
        return True
    return False


async def run_tier0_in_thread(session: Any, doc: Any) -> None:
    """Tier 0 of the current snapshot's text on the tier-0 thread; kept only if the document did not
    change meanwhile (the newer edit has scheduled its own run). Only the text and version are held
    while it runs (not the snapshot: its older analysis is freed as soon as it is replaced)."""
    version, text = doc.version, doc.text
    if stopped_for_size(session, doc):
        return
    target, severity = session.settings.target, dict(session.settings.severity)
    tier0_thread.freeze_startup()

    def current_snapshot() -> Any:  # a run queued behind another is skipped once the text moved on
        if doc.version != version:
            return None
        with tier0_thread.collector_paused():
            result = tier0_snapshot(text, doc.path, target, severity, doc.tier0_state)
        if doc.version != version:  # stale already: freed here, a piece at a time, not on the loop
            tier0_thread.dispose(result)
            return None
        return result

    result = await asyncio.get_running_loop().run_in_executor(tier0_thread.pool(), current_snapshot)
    tier0_thread.pool().submit(tidy, doc.tier0_state)  # on the thread, while the result is published
    if result is None:
        return
    if doc.version == version and session.documents.get(doc.uri) is doc:
        store_tier0(session, doc, version, result)
    elif session.documents.get(doc.uri) is not doc:  # closed while it ran: its tree is not kept
        del result
        doc.tier0_state.clear()
        release_memory()


def tidy(state: Any) -> None:
    """After a big document's analysis (on the tier-0 thread, once its diagnostics are out): free the
    Python ast it did not keep (~100 bytes per byte of text) and give the heap's free pages back to
    the system, so they are not held while the document is open."""
    from ..analysis.ast_units import discard_unkept

    discard_unkept(state)
    release_memory(collect=False)


def store_tier0(session: Any, doc: Any, version: int, result: Any) -> None:
    """A tier-0 result for ``version`` (the document's current one) becomes the document's snapshot."""
    if isinstance(result, Exception):  # a bug in the rules must not take the server down
        doc.snapshot = replace(doc.snapshot, analysis_version=version)
        message = (f"pallasite: the source rules failed on {doc.path} ({type(result).__name__}: {result}); "
                   "the diagnostics shown are from the last successful run. Please report this with the file.")
        if doc.uri not in session.tier0_failed:
            session.tier0_failed.add(doc.uri)
            session.show(message, lsp.MessageType.Error)
        session.log(message)
        return
    old = (doc.analysis, doc.tier0)
    doc.snapshot = doc.snapshot.with_tier0(version, *result)
    if len(doc.text) > tier0_thread.TIER0_INLINE_CHARS:  # freed on the tier-0 thread, a piece at a time
        tier0_thread.pool().submit(tier0_thread.dispose, old)


def stopped_for_size(session: Any, doc: Any) -> bool:
    """Past ``check.maxFileMb`` tier 0 does not run: say so once per document, show nothing."""
    limit = session.settings.check.maxFileMb * 1_000_000
    if len(doc.text) <= limit:
        session.tier0_stopped.discard(doc.uri)
        return False
    doc.snapshot = doc.snapshot.with_tier0(doc.version, None, ())
    if doc.uri not in session.tier0_stopped:
        session.tier0_stopped.add(doc.uri)
        session.show(f"pallasite: {doc.path} has {len(doc.text) / 1e6:.1f} million characters, over the "
                     f"{session.settings.check.maxFileMb:g} MB limit for the source rules (pallasite.check.maxFileMb): "
                     "tier 0 stopped for this file and shows nothing; raise the limit to check it.")
    return True


def ensure_analysis(session: Any, doc: Any) -> bool:
    """Bring tier 0 up to the document's version; whether the document is a Pallas kernel file.
    A big document is never analysed here (on the event loop): until its background run is
    done it counts as not analysed (False)."""
    if doc.analysis_version != doc.version:
        if len(doc.text) > tier0_thread.TIER0_INLINE_CHARS:
            return False
        run_tier0(session, doc)
    return doc.uses_pallas

"""The work the session runs for its documents, as plain functions of the session: the debounced
tier-0 runs, the compiler checks (started on open and save, superseded by a newer save of a different
text, gated by folder trust), their reports turned into a new snapshot of the document, the trust
question, re-checks after a settings change, and the chip table for hovers.

Jobs are asyncio tasks: an edit cancels only pending tier-0 work; a compiler check is superseded
only by a newer save of a different text (or an explicit check). Code never runs for an untrusted
folder: the first kernel file opened there triggers one question per folder; tier 0 never executes
anything.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from lsprotocol import types as lsp

from ..analysis.types import FileReport, Finding

from . import session_settings, tier0_runs, tier0_thread, views
from .progress import WorkProgress
from .settings import Settings
from .shifting import shift_findings
from .trust import inside

WORKER_CRASH_CODES = ("PLS902", "PLS903", "PLS904")
# PLS906 as a finding: the worker never finished starting (killed during its start-up, or an
# environment that cannot run it). PLS906 for a tier libtpu is missing for is a report note: quiet.
WORKER_START_CODE = "PLS906"
TRUST, NOT_NOW = "Trust", "Not now"

# --------------------------------------------------------------------------- tier 0, debounced


def schedule_tier0(session: Any, doc: Any, delay_s: float) -> None:
    """(Re)start the debounced tier-0 run; a newer edit cancels a pending one."""
    if doc.tier0_task is not None:
        doc.tier0_task.cancel()
    doc.tier0_task = asyncio.ensure_future(tier0_after(session, doc, delay_s))


async def tier0_after(session: Any, doc: Any, delay_s: float) -> None:
    await asyncio.sleep(delay_s)
    started = time.perf_counter()
    was_pallas = doc.uses_pallas
    if len(doc.text) > tier0_thread.TIER0_INLINE_CHARS:
        await tier0_runs.run_tier0_in_thread(session, doc)
        if doc.analysis_version != doc.version:
            return  # edited meanwhile: the newer run publishes
        session.publish(doc)
    else:
        # the collector stays off until the diagnostics are out: the collection an analysis puts off
        # (its allocations count towards one) then runs after the publication, not before it
        # (0.7 ms on average per edit of splash attention, paid before the diagnostics left)
        with tier0_thread.collector_off():
            tier0_runs.run_tier0(session, doc)
            session.publish(doc)
    session.tier0_seconds.append(time.perf_counter() - started)
    session.notify_status()  # the status bar's "tier 0: N error(s)" before any check (after the diagnostics)
    if doc.uses_pallas and not was_pallas:
        await consider_check(session, doc, opening=True)


def opened(session: Any, doc: Any) -> None:
    """A document was opened: tier 0 now and published (a big one: on the tier-0 thread, which publishes)."""
    if tier0_runs.run_tier0_inline(session, doc):
        session.publish(doc)
    else:
        schedule_tier0(session, doc, 0)


# --------------------------------------------------------------------------- trust


async def trusted_or_ask(session: Any, folder: str) -> bool:
    """Whether the folder's code may run: decided once the client's settings are known."""
    await session_settings.wait_for_settings(session)
    return session.is_trusted(folder) or await ask_trust(session, folder)


async def ask_trust(session: Any, folder: str) -> bool:
    """Ask once per folder (per session) whether its code may run in a worker."""
    if session.settings.trust.mode != "ask" or folder in session.asked:
        return session.is_trusted(folder)
    session.asked.add(folder)
    params = lsp.ShowMessageRequestParams(
        type=lsp.MessageType.Info,
        message=("Trust this folder to run its kernels in a pallasite worker? "
                 f"{folder}\nUntil then only tier 0 (source rules, nothing executed) runs."),
        actions=[lsp.MessageActionItem(title=TRUST), lsp.MessageActionItem(title=NOT_NOW)])
    try:
        answer = await session.client.window_show_message_request_async(params)
    except Exception as exc:  # a client without showMessageRequest: stay untrusted
        session.log(f"pallasite: could not ask about trusting {folder}: {exc}")
        return False
    if answer is None or answer.title != TRUST or not session_settings.trust(session, folder):
        return False
    session.notify_status()
    check_others_in(session, folder)
    return True


# --------------------------------------------------------------------------- compiler checks


def settings_changed(session: Any, before: Settings) -> None:
    """Re-run tier 0 everywhere; when the verdicts depend on what changed (target, tiers,
    limits, interpreter), drop the old compiler findings and re-check trusted kernel files."""
    recheck = before.checker_key() != session.settings.checker_key()
    for doc in session.documents.values():
        if recheck:  # verdicts for other settings no longer apply
            doc.snapshot = doc.snapshot.with_report(doc.report, (), doc.report_chip, doc.report_time,
                                                     doc.report_version)
        schedule_tier0(session, doc, 0)
        wanted = any(t > 0 for t in session.settings_for(doc.path).tiers)
        if recheck and wanted and session.ensure_analysis(doc) and session.is_trusted(session.folder_of(doc.path)):
            start_check(session, doc)
    views.verdict_changed(session)  # "Check for <chip>" lenses name the new target at once


def get_checker(session: Any, path: str, *, script: bool = False, purpose: str = "check", untrusted: bool = False) -> Any:
    """The engine's checker for ``path`` with the current options (``script``: script mode): it
    runs on the engine's warm check workers and records verdicts in the results store of the
    workspace holding ``path`` (.pallasite/), which also lets it reuse unchanged tier-2 verdicts.
    ``purpose`` "job" runs it on a job worker (tier 3: long), so saves never wait behind it.
    ``untrusted``: for model-written text (confined workers, no results store: engine/workers/confinement.py)."""
    options = session.check_options(path)  # the settings of path's workspace folder
    return session.engine.checker(path, replace(options, script=True) if script else options, purpose=purpose,
                                  untrusted=untrusted)


async def consider_check(session: Any, doc: Any, *, opening: bool = False, saving: bool = False) -> None:
    """Run the compiler tiers if the settings ask for it and the folder is (or becomes) trusted.
    Decided with the client's settings: a file opened before they arrive waits for them."""
    await session_settings.wait_for_settings(session)
    chosen = session.settings_for(doc.path)  # the settings of the document's workspace folder
    wanted = (opening and chosen.check.onOpen) or (saving and chosen.check.onSave)
    if not wanted or not doc.uses_pallas or not any(t > 0 for t in chosen.tiers):
        return
    if await trusted_or_ask(session, session.folder_of(doc.path)):
        running = doc.check_task is not None and not doc.check_task.done()
        if running and doc.check_key == check_key(session, doc.text, None, False, doc.path):
            return  # a save of the very text being checked (same tiers): let that check finish
        if saving or not running:  # (trusting the folder may have started this file's check)
            start_check(session, doc)


def check_others_in(session: Any, folder: str, *, skip: Any = None) -> None:
    """After a folder becomes trusted: check its open kernel files that were never checked."""
    for doc in list(session.documents.values()):
        if not session.settings_for(doc.path).check.onOpen:
            continue
        if doc is not skip and doc.check_task is None and doc.uses_pallas and inside(doc.path, folder):
            start_check(session, doc)


def check_key(session: Any, text: str, tiers: Sequence[int] | None, script: bool, path: str | None = None) -> tuple:
    """What a check is of: a new save with the same key would compute the same verdicts."""
    settings = session.settings_for(path) if path else session.settings
    chosen = tuple(sorted({t for t in (settings.tiers if tiers is None else tiers) if t > 0}))
    return (text, chosen, script, settings.checker_key())


def start_check(session: Any, doc: Any, tiers: Sequence[int] | None = None, *,
                progress_token: Any = None, script: bool = False) -> asyncio.Task:
    """Check the document's current text with the compiler tiers; supersedes a running check.
    ``script``: run the file's ``__main__`` and check every pallas_call it makes (script mode)."""
    if doc.check_task is not None and not doc.check_task.done():
        doc.check_task.cancel()
    if doc.locate_task is not None and not doc.locate_task.done():
        doc.locate_task.cancel()  # its findings are of the text the new check supersedes
    doc.edit_log = []
    chosen = [t for t in (session.settings_for(doc.path).tiers if tiers is None else tiers) if t > 0]
    doc.check_version, doc.check_key = doc.version, check_key(session, doc.text, tiers, script, doc.path)
    session.checks_started += 1 if chosen else 0
    doc.check_task = asyncio.ensure_future(run_check(session, doc, doc.version, doc.text, chosen, progress_token,
                                                     script, tier0_runs.analysis_for_check(session, doc)))
    # every view follows: "Checking for <chip>…" now, the verdict when the task ends (a report, a
    # failure, a cancellation); a done callback runs once the task is done, so it reads as ended
    doc.check_task.add_done_callback(lambda _task: views.verdict_changed(session)
                                     if session.documents.get(doc.uri) is doc else None)  # (not after a close)
    views.verdict_changed(session)
    return doc.check_task


def set_worker(session: Any, state: str) -> None:
    session.worker_state = state
    session.notify_status()


async def run_check(session: Any, doc: Any, version: int, text: str, tiers: list[int], token: Any,
                    script: bool = False, analysis: Any = None) -> FileReport | None:
    """One check of ``text`` (the document's at ``version``, when it started); its report becomes a
    new snapshot, its findings moved through the edits made since. Only the text and its tier-0
    ``analysis`` (the checker takes it rather than analysing the text again) are held while it
    runs, not the snapshot."""
    if not tiers:
        return None
    folder = session.folder_of(doc.path)
    if not session.is_trusted(folder):  # the one gate every code-running path goes through
        session.log(f"pallasite: not checking {doc.path}: {folder} is not trusted (tier 0 only).")
        return None
    report = await _checked(session, doc, text, tiers, token, script, analysis)
    if report is None or session.documents.get(doc.uri) is not doc:
        return report
    carried = list(doc.edit_log)  # the edits since ``version``, for the locate step's findings
    crashes = accept_report(session, doc, report, version, shown=as_check(session, doc, report, text, tiers, analysis))
    for note in report.notes:
        session.log(f"pallasite: {note}")
    for finding in crashes:
        session.show(f"pallasite: {finding.message.splitlines()[0]} ({finding.code}, {doc.path}). "
                     "The worker restarts for the next check.", lsp.MessageType.Error)
    session.worker_warm = not crashes
    set_worker(session, "crashed" if any(f.code in ("PLS902", WORKER_START_CODE) for f in crashes) else "idle")
    session.publish(doc)
    if session.worker_warm:
        fetch_chip_table(session)
    if report.wrong_outputs and not script and session.settings_for(doc.path).check.locate:
        doc.locate_log = carried
        doc.locate_task = asyncio.ensure_future(run_locate(session, doc, version, text, report, tiers, analysis))
    return report


async def run_locate(session: Any, doc: Any, version: int, text: str, report: FileReport, tiers: Sequence[int],
                     analysis: Any = None) -> FileReport | None:
    """The locate step for a check's tier-3 failures, in the background after the check was published
    (engine/findings/locate_step.py): its findings replace the check's, moved through the edits made since
    ``version``; nothing of tier 0's or the check's publication waits for it. A newer check cancels it."""
    checker = get_checker(session, doc.path, purpose="job")
    started = time.perf_counter()
    try:
        located = await checker.locate(report, text, analysis=analysis)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the step is optional: the check's findings stand
        session.log(f"pallasite: the locate step for {doc.path} failed ({type(exc).__name__}: {exc})")
        return None
    if session.documents.get(doc.uri) is not doc or doc.check_version != version:
        return None  # closed, or checked again since: that check's findings are the ones shown
    session.locate_seconds.append(time.perf_counter() - started)
    edits = [e for v, es in doc.locate_log if v > version for e in es]
    doc.locate_log = []
    accept_report(session, doc, located, version, shown=as_check(session, doc, located, text, tiers, analysis),
                  edits=edits)
    for note in located.notes:
        if note.startswith("locate step"):
            session.log(f"pallasite: {note}")
    session.publish(doc)
    return located


async def _checked(session: Any, doc: Any, text: str, tiers: list[int], token: Any, script: bool,
                   analysis: Any = None) -> FileReport | None:
    """The checker's report of ``text`` with progress, or None when the checker itself failed (said)."""
    # the engine's warm workers and results store; a tier-3 run is long: a job worker takes it
    checker = get_checker(session, doc.path, script=script, purpose="job" if 3 in tiers else "check")
    title = f"pallasite: {'running' if script else 'checking'} {Path(doc.path).name} for {session.settings_for(doc.path).target}"
    set_worker(session, "checking" if session.worker_warm else "starting")
    progress = WorkProgress(session.client, title + (" (script mode)" if script else ""), token)

    def on_progress(message: str) -> None:
        if session.worker_state == "starting":
            set_worker(session, "checking")
        progress.report(message)

    try:
        progress.begin(tiers)
        report = await checker.check(doc.path, text, tiers=tiers, on_progress=on_progress, analysis=analysis)
    except asyncio.CancelledError:
        if doc.check_task is asyncio.current_task() or doc.check_task is None or doc.check_task.done():
            set_worker(session, "idle")
        progress.end("cancelled")
        raise
    except Exception as exc:  # the checker itself failed: say so, keep serving
        set_worker(session, "crashed")
        progress.end("failed")
        session.show(f"pallasite: the check of {doc.path} failed ({type(exc).__name__}: {exc}). "
                     "Tier 0 keeps running; save again to retry.", lsp.MessageType.Error)
        return None
    progress.end("done")
    return report


def as_check(session: Any, doc: Any, report: FileReport, text: str, tiers: Sequence[int], analysis: Any) -> FileReport:
    """The report as `pallasite check` makes it with the document's settings: the editor's check ran the
    compiler tiers (tier 0 runs on every edit), so tier 0 of the checked ``text`` is filled in, and the
    hover says the file's compile verdict in check's words."""
    if 0 in tiers or 0 not in session.settings_for(doc.path).tiers:
        return report
    return get_checker(session, doc.path).with_tier0(report, text, analysis)


def accept_report(session: Any, doc: Any, report: FileReport, version: int, *,
                  shown: FileReport | None = None, edits: list[Any] | None = None) -> list[Finding]:
    """Compiler findings of a report for ``version``, moved to the document's current text (a new
    snapshot, which keeps ``shown``: the report as check makes it, else ``report``); the worker crashes
    it reports. ``edits``: the edits made since ``version`` (default: the running check's log)."""
    kept = [f for f in report.findings if f.tier > 0 or f.code.startswith("PLS9")]
    sites = doc.analysis.sites if doc.analysis is not None else ()
    moved = shift_findings(kept, doc.edits_since(version) if edits is None else edits)
    doc.snapshot = doc.snapshot.with_report(shown or report, [tier0_runs.with_site_context(f, sites) for f in moved],
                                            session.settings.target, time.time(), version)
    doc.edit_log = [(v, e) for v, e in doc.edit_log if v > doc.version]
    return [f for f in report.findings if f.code in (*WORKER_CRASH_CODES, WORKER_START_CODE)]


# --------------------------------------------------------------------------- the chip table for hovers


def fetch_chip_table(session: Any) -> None:
    """Once per session, after a check succeeded (so the folder is trusted and its workers warm):
    when the chip-table cache has no scoped VMEM limit for the target, ask the warm check worker for the
    table in the background (it probes libtpu) so hovers can show the limit and its source."""
    if session.chip_task is not None or session.engine.chip_table is not None:
        return
    from ..engine import chip_table

    cached = chip_table.cached() or []
    if any(s.name == session.settings.target and s.scoped_vmem_limit_bytes for s in cached):
        return
    session.chip_task = asyncio.ensure_future(fetch_chip_table_now(session))


async def fetch_chip_table_now(session: Any) -> None:
    try:
        specs, problem = await session.engine.fetch_chip_table(session.check_options())
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # hovers go without the limit; checks are unaffected
        session.log(f"pallasite: asking the worker for the chip table failed ({type(exc).__name__}: {exc}).")
        return
    if specs is None:
        session.log(f"pallasite: {problem}; hovers show no scoped VMEM limit (run `pallasite chips`).")
    elif problem:
        session.log(f"pallasite: {problem}.")

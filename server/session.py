"""The server's state: open documents, effective settings, folder trust, and the checks it runs
(settings layers and trust decisions live in session_settings.py). Workers, results stores, the
chip table and jobs belong to the engine (engine/engine.py, ``Session.engine``).

A ``Document`` keeps its own text and every finding already moved to that text's version:
tier-0 findings (recomputed after a debounce) and compiler findings (from the last check, carried
through every edit since the text it was computed for; see shifting.py). Diagnostics are
published only from this state, so nothing computed for an older text is shown unshifted.

Jobs are asyncio tasks: an edit cancels only pending tier-0 work; a compiler check is superseded
only by a newer save of a different text (or an explicit check). Code never runs for an untrusted folder: the first
kernel file opened there triggers one question per folder; tier 0 never executes anything.
"""

from __future__ import annotations

import asyncio
import gc
import re
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from lsprotocol import types as lsp

from pallasite.analysis.source import forget as forget_tree, release_memory
from pallasite.analysis.suppress import apply_suppressions
from pallasite.analysis.types import FileReport, Finding, Related

from pallasite.engine.engine import Engine

from .features import FeatureState
from .lsp_convert import finding_to_diagnostic
from .progress import WorkProgress
from .session_settings import SettingsAndTrust
from .settings import Settings
from . import tier0_thread
from .shifting import Edit, LineIndex, shift_findings
from .trust import inside

WORKER_CRASH_CODES = ("PLS902", "PLS903", "PLS904")
# PLS906 as a finding: the worker never finished starting (killed during its start-up, or an
# environment that cannot run it). PLS906 for a tier libtpu is missing for is a report note: quiet.
WORKER_START_CODE = "PLS906"
STATUS_METHOD = "pallasite/status"


# --------------------------------------------------------------------------- documents


@dataclass
class Document:
    uri: str
    path: str
    version: int
    text: str
    seen_versions: set[int] = field(default_factory=set)
    analysis: Any = None  # tier0.SourceAnalysis of ``analysis_version``
    analysis_version: int | None = None
    tier0: list[Finding] = field(default_factory=list)  # at ``version``
    compiler: list[Finding] = field(default_factory=list)  # at ``version``
    edit_log: list[tuple[int, list[Edit]]] = field(default_factory=list)  # (version after, edits)
    report: FileReport | None = None
    report_chip: str | None = None
    report_time: float | None = None
    tier0_task: asyncio.Task | None = None
    check_task: asyncio.Task | None = None
    check_version: int | None = None
    check_key: tuple | None = None  # (text, tiers, script) of the last started check
    published: bool = False
    _index: LineIndex | None = field(default=None, repr=False)

    @property
    def lines(self) -> LineIndex:
        """The text's lines (a ``LineIndex``: found lazily, kept through edits)."""
        if self._index is None or self._index.text is not self.text:
            self._index = LineIndex(self.text)
        return self._index

    @property
    def uses_pallas(self) -> bool:
        return bool(self.analysis is not None and self.analysis.uses_pallas)

    def findings(self) -> list[Finding]:
        """What the user sees: tier-0 and compiler findings, one finding per mistake (a compiler
        finding repeating a tier-0 one becomes its related "agrees" entry)."""
        from pallasite.engine.agreement import merge_agreeing  # client side, jax-free

        if not self.compiler:
            return list(self.tier0)
        return merge_agreeing([*self.tier0, *self.compiler], self.analysis.sites if self.analysis else ())

    def apply(self, version: int, edits: Sequence[Edit]) -> None:
        """Edits from the client, in order; every finding moves with the text."""
        for edit in edits:
            self.text = self.lines.apply(edit)
        self.tier0 = shift_findings(self.tier0, edits)
        self.compiler = shift_findings(self.compiler, edits)
        self.version = version
        self.seen_versions.add(version)
        if self.check_task is not None and not self.check_task.done():
            self.edit_log.append((version, list(edits)))

    def edits_since(self, version: int) -> list[Edit]:
        return [e for v, edits in self.edit_log if v > version for e in edits]


# --------------------------------------------------------------------------- helpers


_SURROGATE = re.compile("[\ud800-\udfff]")


def analyzable(text: str) -> str:
    """``text`` with lone surrogates (a client may send ``"\\ud800"``) replaced by U+FFFD: one
    code point for one, so every column stays where it was, and the text encodes as UTF-8."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def analyze(text: str, path: str, target: str) -> Any:
    from pallasite.analysis import tier0
    from pallasite.engine.checker import scoped_vmem

    return tier0.analyze(analyzable(text), path, target=target, scoped_vmem=scoped_vmem(target))


def suppress(findings: Sequence[Finding], text: str, overrides: dict[str, str]) -> list[Finding]:
    """Suppression comments and severity overrides (analysis/suppress.py)."""
    return list(apply_suppressions(list(findings), text, dict(overrides)))


def tier0_snapshot(text: str, path: str, target: str, severity: dict[str, str]) -> Any:
    """(analysis, findings to show) of one text, or the exception the rules raised. A plain
    function of its arguments, so it can run on the tier-0 thread."""
    try:
        analysis = analyze(text, path, target)
        found = suppress(analysis.findings, text, severity)
        return analysis, [with_site_context(f, analysis.sites) for f in found]
    except Exception as exc:  # noqa: BLE001 - reported as data by Session._store_tier0
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


# --------------------------------------------------------------------------- the session


class Session(SettingsAndTrust):
    """Documents, settings, trust and jobs of one server; ``client`` is the pygls server.
    Settings layers and folder trust come from ``SettingsAndTrust`` (session_settings.py)."""

    def __init__(self, client: Any):
        self.client = client
        self.settings = Settings()
        self.layers: dict[str, dict[str, Any]] = {}  # source -> raw settings
        self.folder_layers: dict[str, dict[str, Any]] = {}  # workspace folder -> its own raw settings
        self.documents: dict[str, Document] = {}
        self.folders: list[str] = []
        self.pending_warnings: list[str] = []  # settings problems found before the client was ready
        self.asked: set[str] = set()
        self.session_trusted: set[str] = set()
        self.engine = Engine()  # backends (warm workers), results stores, chip table, jobs: engine/engine.py
        self.worker_state = "idle"  # idle | starting | checking | crashed
        self.worker_warm = False  # a worker of the current checker has answered a check
        self.last_status: dict[str, Any] | None = None
        self.encoding = "utf-16"
        self.tier0_failed: set[str] = set()  # documents whose source analysis raised (told once)
        self.tier0_stopped: set[str] = set()  # documents over check.maxFileMb (told once)
        self.tier0_seconds: deque[float] = deque(maxlen=1000)  # debounce end -> published, per run
        self.settings_ready = asyncio.Event()  # set once the first workspace/configuration pull ends
        self.project: tuple[str, str] | None = None  # (settings source, folder) of the pyproject read
        self.refused_interpreters: set[str] = set()  # project interpreters refused (told once each)
        self.checks_started = 0  # compiler checks started this session (server stats)
        self.chip_task: asyncio.Task | None = None  # asking the warm check worker for the chip table
        self.features = FeatureState()  # optimize runs, tune reports, step decisions, hints, timings

    # ------------------------------------------------------------- settings

    def settings_changed(self, before: Settings) -> None:
        """Re-run tier 0 everywhere; when the verdicts depend on what changed (target, tiers,
        limits, interpreter), drop the old compiler findings and re-check trusted kernel files."""
        recheck = before.checker_key() != self.settings.checker_key()
        for doc in self.documents.values():
            if recheck:
                doc.compiler = []  # verdicts for other settings no longer apply
            self.schedule_tier0(doc, 0)
            wanted = any(t > 0 for t in self.settings_for(doc.path).tiers)
            if recheck and wanted and self.ensure_analysis(doc) and self.is_trusted(self.folder_of(doc.path)):
                self.start_check(doc)
        self.notify_status()

    @property
    def chip_table(self) -> list[Any] | None:
        """ChipSpecs a worker sent this session (the engine keeps them), for hovers."""
        return self.engine.chip_table

    def drop_checker(self) -> None:
        """Stop the workers; the next check starts fresh ones for new settings."""
        self.worker_warm = False
        self.engine.drop_backend()

    def get_checker(self, path: str, *, script: bool = False, purpose: str = "check", untrusted: bool = False) -> Any:
        """The engine's checker for ``path`` with the current options (``script``: script mode): it
        runs on the engine's warm check workers and records verdicts in the results store of the
        workspace holding ``path`` (.pallasite/), which also lets it reuse unchanged tier-2 verdicts.
        Changed worker settings (e.g. the project interpreter became allowed) start new workers.
        ``purpose`` "job" runs it on a job worker (tier 3: long), so saves never wait behind it.
        ``untrusted``: for model-written text (confined workers, no results store: engine/confinement.py)."""
        options = self.check_options(path)  # the settings of path's workspace folder
        return self.engine.checker(path, replace(options, script=True) if script else options, purpose=purpose,
                                   untrusted=untrusted)

    # ------------------------------------------------------------- documents

    def open(self, uri: str, path: str, version: int, text: str) -> Document:
        doc = Document(uri=uri, path=path, version=version, text=text, seen_versions={version})
        self.documents[uri] = doc
        return doc

    def close(self, uri: str) -> Document | None:
        """Stop the document's work and give its memory back: its tree-sitter trees (its analysis
        and the incremental-parse cache's, ~50 bytes per byte of text) go now, not later."""
        doc = self.documents.pop(uri, None)
        if doc is not None:
            for task in (doc.tier0_task, doc.check_task):
                if task is not None:
                    task.cancel()
            doc.analysis, doc.tier0 = None, []
            forget_tree(doc.path)
            if len(doc.text) > tier0_thread.RELEASE_ABOVE_CHARS:
                gc.unfreeze()  # what collector_paused froze may hold its cycles
                release_memory()
        return doc

    def run_tier0(self, doc: Document) -> None:
        """Tier 0 for the document's current text, here and now (in process; executes nothing).
        If the source analysis itself fails, say so once per document and keep the last findings."""
        version = doc.version
        if self._stopped_for_size(doc):
            return
        self._store_tier0(doc, version, tier0_snapshot(doc.text, doc.path, self.settings.target,
                                                       dict(self.settings.severity)))

    def run_tier0_inline(self, doc: Document) -> bool:
        """Small documents: tier 0 now (True). Big ones: in the background, off the event loop; the
        background run publishes (False)."""
        if len(doc.text) <= tier0_thread.TIER0_INLINE_CHARS:
            self.run_tier0(doc)
            return True
        self.schedule_tier0(doc, 0)
        return False

    async def run_tier0_in_thread(self, doc: Document) -> None:
        """Tier 0 of a snapshot of the text on the tier-0 thread; kept only if the document did not
        change meanwhile (the newer edit has scheduled its own run)."""
        version = doc.version
        if self._stopped_for_size(doc):
            return
        text, target, severity = doc.text, self.settings.target, dict(self.settings.severity)

        def current_snapshot() -> Any:  # a run queued behind another is skipped once the text moved on
            if doc.version != version:
                return None
            with tier0_thread.collector_paused():
                result = tier0_snapshot(text, doc.path, target, severity)
            if doc.version != version:  # stale already: freed here, a piece at a time, not on the loop
                tier0_thread.dispose(result)
                return None
            return result

        result = await asyncio.get_running_loop().run_in_executor(tier0_thread.pool(), current_snapshot)
        if result is None:
            return
        if doc.version == version and self.documents.get(doc.uri) is doc:
            self._store_tier0(doc, version, result)
        elif self.documents.get(doc.uri) is not doc:  # closed while it ran: its tree is not kept
            del result
            forget_tree(doc.path)
            release_memory()

    def _store_tier0(self, doc: Document, version: int, result: Any) -> None:
        doc.analysis_version = version
        if isinstance(result, Exception):  # a bug in the rules must not take the server down
            message = (f"pallasite: the source rules failed on {doc.path} ({type(result).__name__}: {result}); "
                       "the diagnostics shown are from the last successful run. Please report this with the file.")
            if doc.uri not in self.tier0_failed:
                self.tier0_failed.add(doc.uri)
                self.show(message, lsp.MessageType.Error)
            self.log(message)
            return
        old = (doc.analysis, doc.tier0)
        doc.analysis, doc.tier0 = result
        if len(doc.text) > tier0_thread.TIER0_INLINE_CHARS:  # freed on the tier-0 thread, a piece at a time
            tier0_thread.pool().submit(tier0_thread.dispose, old)

    def _stopped_for_size(self, doc: Document) -> bool:
        """Past ``check.maxFileMb`` tier 0 does not run: say so once per document, show nothing."""
        limit = self.settings.check.maxFileMb * 1_000_000
        if len(doc.text) <= limit:
            self.tier0_stopped.discard(doc.uri)
            return False
        doc.analysis_version, doc.analysis, doc.tier0 = doc.version, None, []
        if doc.uri not in self.tier0_stopped:
            self.tier0_stopped.add(doc.uri)
            self.show(f"pallasite: {doc.path} has {len(doc.text) / 1e6:.1f} million characters, over the "
                      f"{self.settings.check.maxFileMb:g} MB limit for the source rules (pallasite.check.maxFileMb): "
                      "tier 0 stopped for this file and shows nothing; raise the limit to check it.")
        return True

    def ensure_analysis(self, doc: Document) -> bool:
        """Bring tier 0 up to the document's version; whether the document is a Pallas kernel file.
        A big document is never analysed here (on the event loop): until its background run is
        done it counts as not analysed (False)."""
        if doc.analysis_version != doc.version:
            if len(doc.text) > tier0_thread.TIER0_INLINE_CHARS:
                return False
            self.run_tier0(doc)
        return doc.uses_pallas

    def accept_report(self, doc: Document, report: FileReport, version: int) -> list[Finding]:
        """Compiler findings of a report for ``version``, moved to the document's current text."""
        kept = [f for f in report.findings if f.tier > 0 or f.code.startswith("PLS9")]
        sites = doc.analysis.sites if doc.analysis is not None else ()
        moved = shift_findings(kept, doc.edits_since(version))
        doc.compiler = [with_site_context(f, sites) for f in moved]
        doc.report, doc.report_chip, doc.report_time = report, self.settings.target, time.time()
        doc.edit_log = [(v, e) for v, e in doc.edit_log if v > doc.version]
        return [f for f in report.findings if f.code in (*WORKER_CRASH_CODES, WORKER_START_CODE)]

    # ------------------------------------------------------------- status

    def status(self) -> dict[str, Any]:
        folders = self.folders or [str(Path(d.path).parent) for d in self.documents.values()]
        return {
            "target": self.settings.target,
            "backend": self.settings.backend.kind,
            "worker": self.worker_state,
            "trusted": bool(folders) and all(self.is_trusted(f) for f in folders),
            "tiers": list(self.settings.tiers),
        }

    def status_changed(self) -> dict[str, Any] | None:
        now = self.status()
        if now == self.last_status:
            return None
        self.last_status = now
        return now

    # ------------------------------------------------------------- talking to the client

    def notify_status(self) -> None:
        status = self.status_changed()
        if status is not None:
            self.client.protocol.notify(STATUS_METHOD, status)

    def set_worker(self, state: str) -> None:
        self.worker_state = state
        self.notify_status()

    def show(self, message: str, kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        self.client.window_show_message(lsp.ShowMessageParams(type=kind, message=message))

    def log(self, message: str) -> None:
        self.client.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Log, message=message))

    def publish(self, doc: Document) -> None:
        """Diagnostics for the document's current version (silent on files without Pallas)."""
        if not doc.uses_pallas:
            if doc.published:
                self.client.text_document_publish_diagnostics(
                    lsp.PublishDiagnosticsParams(uri=doc.uri, diagnostics=[], version=doc.version))
                doc.published = False
            return
        diagnostics = [finding_to_diagnostic(f, doc.uri, doc.lines, self.encoding, doc.version) for f in doc.findings()]
        self.client.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=doc.uri, diagnostics=diagnostics, version=doc.version))
        doc.published = True

    # ------------------------------------------------------------- jobs

    def schedule_tier0(self, doc: Document, delay_s: float) -> None:
        """(Re)start the debounced tier-0 run; a newer edit cancels a pending one."""
        if doc.tier0_task is not None:
            doc.tier0_task.cancel()
        doc.tier0_task = asyncio.ensure_future(self._tier0_after(doc, delay_s))

    async def _tier0_after(self, doc: Document, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        started = time.perf_counter()
        was_pallas = doc.uses_pallas
        if len(doc.text) > tier0_thread.TIER0_INLINE_CHARS:
            await self.run_tier0_in_thread(doc)
            if doc.analysis_version != doc.version:
                return  # edited meanwhile: the newer run publishes
        else:
            self.run_tier0(doc)
        self.publish(doc)
        self.tier0_seconds.append(time.perf_counter() - started)
        if doc.uses_pallas and not was_pallas:
            await self.consider_check(doc, opening=True)

    async def consider_check(self, doc: Document, *, opening: bool = False, saving: bool = False) -> None:
        """Run the compiler tiers if the settings ask for it and the folder is (or becomes) trusted.
        Decided with the client's settings: a file opened before they arrive waits for them."""
        await self.wait_for_settings()
        chosen = self.settings_for(doc.path)  # the settings of the document's workspace folder
        wanted = (opening and chosen.check.onOpen) or (saving and chosen.check.onSave)
        if not wanted or not doc.uses_pallas or not any(t > 0 for t in chosen.tiers):
            return
        if await self.trusted_or_ask(self.folder_of(doc.path)):
            running = doc.check_task is not None and not doc.check_task.done()
            if running and doc.check_key == self.check_key(doc.text, None, False, doc.path):
                return  # a save of the very text being checked (same tiers): let that check finish
            if saving or not running:  # (trusting the folder may have started this file's check)
                self.start_check(doc)

    def check_others_in(self, folder: str, *, skip: Document | None = None) -> None:
        """After a folder becomes trusted: check its open kernel files that were never checked."""
        for doc in list(self.documents.values()):
            if not self.settings_for(doc.path).check.onOpen:
                continue
            if doc is not skip and doc.check_task is None and doc.uses_pallas and inside(doc.path, folder):
                self.start_check(doc)

    def check_key(self, text: str, tiers: Sequence[int] | None, script: bool, path: str | None = None) -> tuple:
        """What a check is of: a new save with the same key would compute the same verdicts."""
        settings = self.settings_for(path) if path else self.settings
        chosen = tuple(sorted({t for t in (settings.tiers if tiers is None else tiers) if t > 0}))
        return (text, chosen, script, settings.checker_key())

    def start_check(self, doc: Document, tiers: Sequence[int] | None = None, *,
                    progress_token: Any = None, script: bool = False) -> asyncio.Task:
        """Check the document's current text with the compiler tiers; supersedes a running check.
        ``script``: run the file's ``__main__`` and check every pallas_call it makes (script mode)."""
        if doc.check_task is not None and not doc.check_task.done():
            doc.check_task.cancel()
        doc.edit_log = []
        chosen = [t for t in (self.settings_for(doc.path).tiers if tiers is None else tiers) if t > 0]
        doc.check_version, doc.check_key = doc.version, self.check_key(doc.text, tiers, script, doc.path)
        self.checks_started += 1 if chosen else 0
        doc.check_task = asyncio.ensure_future(self._check(doc, doc.version, doc.text, chosen, progress_token,
                                                             script))
        return doc.check_task

    async def _check(self, doc: Document, version: int, text: str, tiers: list[int], token: Any,
                     script: bool = False) -> FileReport | None:
        if not tiers:
            return None
        folder = self.folder_of(doc.path)
        if not self.is_trusted(folder):  # the one gate every code-running path goes through
            self.log(f"pallasite: not checking {doc.path}: {folder} is not trusted (tier 0 only).")
            return None
        # the engine's warm workers and results store; a tier-3 run is long: a job worker takes it
        checker = self.get_checker(doc.path, script=script, purpose="job" if 3 in tiers else "check")
        chip = self.settings_for(doc.path).target
        self.set_worker("checking" if self.worker_warm else "starting")
        title = f"pallasite: {'running' if script else 'checking'} {Path(doc.path).name} for {chip}"
        progress = WorkProgress(self.client, title + (" (script mode)" if script else ""), token)

        def on_progress(message: str) -> None:
            if self.worker_state == "starting":
                self.set_worker("checking")
            progress.report(message)

        try:
            progress.begin(tiers)
            report = await checker.check(doc.path, text, tiers=tiers, on_progress=on_progress)
        except asyncio.CancelledError:
            if doc.check_task is asyncio.current_task() or doc.check_task is None or doc.check_task.done():
                self.set_worker("idle")
            progress.end("cancelled")
            raise
        except Exception as exc:  # the checker itself failed: say so, keep serving
            self.set_worker("crashed")
            progress.end("failed")
            self.show(f"pallasite: the check of {doc.path} failed ({type(exc).__name__}: {exc}). "
                      "Tier 0 keeps running; save again to retry.", lsp.MessageType.Error)
            return None
        progress.end("done")
        if self.documents.get(doc.uri) is not doc:
            return report
        crashes = self.accept_report(doc, report, version)
        for note in report.notes:
            self.log(f"pallasite: {note}")
        for finding in crashes:
            self.show(f"pallasite: {finding.message.splitlines()[0]} ({finding.code}, {doc.path}). "
                      "The worker restarts for the next check.", lsp.MessageType.Error)
        self.worker_warm = not crashes
        died = any(f.code in ("PLS902", WORKER_START_CODE) for f in crashes)
        self.set_worker("crashed" if died else "idle")
        self.publish(doc)
        if self.worker_warm:
            self.fetch_chip_table()
        return report

    # ------------------------------------------------------------- the chip table for hovers

    def fetch_chip_table(self) -> None:
        """Once per session, after a check succeeded (so the folder is trusted and its workers warm):
        when the chip-table cache has no scoped VMEM limit for the target, ask the warm check worker for the
        table in the background (it probes libtpu) so hovers can show the limit and its source."""
        if self.chip_task is not None or self.engine.chip_table is not None:
            return
        from pallasite.engine import chip_table

        cached = chip_table.cached() or []
        if any(s.name == self.settings.target and s.scoped_vmem_limit_bytes for s in cached):
            return
        self.chip_task = asyncio.ensure_future(self._fetch_chip_table())

    async def _fetch_chip_table(self) -> None:
        try:
            specs, problem = await self.engine.fetch_chip_table(self.check_options())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # hovers go without the limit; checks are unaffected
            self.log(f"pallasite: asking the worker for the chip table failed ({type(exc).__name__}: {exc}).")
            return
        if specs is None:
            self.log(f"pallasite: {problem}; hovers show no scoped VMEM limit (run `pallasite chips`).")
        elif problem:
            self.log(f"pallasite: {problem}.")

"""The server's state: the document index, the effective settings and folder trust, the features'
state, and talking to the client. Workers, results stores, the chip table and jobs belong to the
engine (engine/engine.py, ``Session.engine``).

Each open ``Document`` (documents.py) holds an immutable ``DocumentSnapshot``: its text with the
tier-0 and compiler findings already moved to that text (shifting.py). An edit, a tier-0 run or a
finished check replaces the snapshot; a request works on ``Session.snapshot(uri)`` alone.
Diagnostics are published only from the current snapshot, so nothing computed for an older text is
shown unshifted.

The logic lives in plain functions of the session: the settings layers and trust in
session_settings.py, tier 0 in tier0_runs.py, checks and the trust question in checks.py; this
class holds the state they share and answers the few questions every handler asks.
"""

from __future__ import annotations

import asyncio
import gc
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp

from ..analysis.source import release_memory

from ..engine.engine import Engine

from . import session_settings, tier0_runs, tier0_thread
from .documents import Document, DocumentSnapshot
from .features import FeatureState
from .lsp_convert import finding_to_diagnostic
from .settings import Settings
from .tier0_runs import analyze, tier0_snapshot, with_site_context  # noqa: F401 - the names tests and tools use

STATUS_METHOD = "pallasite/status"


def status_of(session: "Session") -> dict[str, Any]:
    """What the status bar shows: target, backend, worker state, trust, tiers, and per open kernel
    document (``files``: ``[{"uri", "state", "verdict", "detail"}]``) its last verdict (file_verdicts.py),
    of which a client shows the active editor's."""
    from .file_verdicts import files_status

    folders = session.folders or [str(Path(d.path).parent) for d in session.documents.values()]
    return {
        "target": session.settings.target,
        "backend": session.settings.backend.kind,
        "worker": session.worker_state,
        "trusted": bool(folders) and all(session.is_trusted(f) for f in folders),
        "tiers": list(session.settings.tiers),
        "files": files_status(session),
    }


class Session:
    """Documents, settings, trust, features and jobs of one server; ``client`` is the pygls server."""

    def __init__(self, client: Any):
        self.client = client
        self.settings = Settings()
        self.layers: dict[str, dict[str, Any]] = {}  # source -> raw settings
        self.folder_layers: dict[str, dict[str, Any]] = {}  # workspace folder -> its own raw settings
        self.documents: dict[str, Document] = {}  # the document index: uri -> document
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
        self.locate_seconds: deque[float] = deque(maxlen=1000)  # the locate step's wall time per file (background)
        self.settings_ready = asyncio.Event()  # set once the first workspace/configuration pull ends
        self.project: tuple[str, str] | None = None  # (settings source, folder) of the pyproject read
        self.refused_interpreters: set[str] = set()  # project interpreters refused (told once each)
        self.checks_started = 0  # compiler checks started this session (server stats)
        self.chip_task: asyncio.Task | None = None  # asking the warm check worker for the chip table
        self.features = FeatureState()  # optimize runs, tune reports, step decisions, hints, timings

    # ------------------------------------------------------------- the document index

    def open(self, uri: str, path: str, version: int, text: str) -> Document:
        doc = Document.opened(uri, path, version, text)
        self.documents[uri] = doc
        return doc

    def close(self, uri: str) -> Document | None:
        """Stop the document's work and give its memory back: its tree-sitter trees (its analysis
        and its ``Tier0State``'s, ~50 bytes per byte of text) go now, not later."""
        doc = self.documents.pop(uri, None)
        if doc is not None:
            for task in (doc.tier0_task, doc.check_task):
                if task is not None:
                    task.cancel()
            doc.snapshot = doc.snapshot.with_tier0(doc.analysis_version, None, ())
            doc.tier0_state.clear()
            if len(doc.text) > tier0_thread.RELEASE_ABOVE_CHARS:
                gc.unfreeze()  # what collector_paused froze may hold its cycles
                release_memory()
        return doc

    def snapshot(self, uri: str, *, analysed: bool = True) -> DocumentSnapshot | None:
        """The immutable state a request works on: the document's current snapshot (tier 0 brought
        up to date first when ``analysed``) with the position encoding and the effective settings;
        None for a document not open (or, when ``analysed``, not a Pallas kernel file yet)."""
        doc = self.documents.get(uri)
        if doc is None or (analysed and not self.ensure_analysis(doc)):
            return None
        return replace(doc.snapshot, encoding=self.encoding, settings=self.settings)

    def ensure_analysis(self, doc: Document) -> bool:
        """Tier 0 up to the document's version; whether it is a Pallas kernel file (tier0_runs.py)."""
        return tier0_runs.ensure_analysis(self, doc)

    def run_tier0(self, doc: Document) -> None:
        """Tier 0 for the document's current text, here and now (tier0_runs.py)."""
        tier0_runs.run_tier0(self, doc)

    # ------------------------------------------------------------- settings and trust (session_settings.py)

    def settings_for(self, path: str | None) -> Settings:
        return session_settings.settings_for(self, path)

    def folder_of(self, path: str) -> str:
        return session_settings.folder_of(self, path)

    def is_trusted(self, folder: str) -> bool:
        return session_settings.is_trusted(self, folder)

    def check_options(self, path: str | None = None) -> Any:
        return session_settings.check_options(self, path)

    # ------------------------------------------------------------- talking to the client

    def notify_status(self) -> None:
        status = status_of(self)
        if status != self.last_status:
            self.last_status = status
            self.client.protocol.notify(STATUS_METHOD, status)

    def show(self, message: str, kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        self.client.window_show_message(lsp.ShowMessageParams(type=kind, message=message))

    def log(self, message: str) -> None:
        self.client.window_log_message(lsp.LogMessageParams(type=lsp.MessageType.Log, message=message))

    def publish(self, doc: Document) -> None:
        """Diagnostics for the document's current snapshot (silent on files without Pallas)."""
        snapshot = doc.snapshot
        if not snapshot.uses_pallas:
            if doc.published:
                self.client.text_document_publish_diagnostics(
                    lsp.PublishDiagnosticsParams(uri=snapshot.uri, diagnostics=[], version=snapshot.version))
                doc.published = False
            return
        diagnostics = [finding_to_diagnostic(f, snapshot.uri, snapshot.lines, self.encoding, snapshot.version)
                       for f in snapshot.findings(dict(self.settings.severity))]
        self.client.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=snapshot.uri, diagnostics=diagnostics, version=snapshot.version))
        doc.published = True

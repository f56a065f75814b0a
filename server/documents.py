"""Open documents: an immutable ``DocumentSnapshot`` per state, a ``Document`` that holds the latest.

A ``DocumentSnapshot`` is one text of a document (uri, path, version, text) with everything
computed for it: the source analysis, the tier-0 and compiler findings moved to this text, the
last compiler report, and (for a request) the position encoding and settings it is served with.
It is a frozen dataclass: nothing changes it. An edit, a tier-0 run and a finished check each make
a new snapshot (``edited``, ``with_tier0``, ``with_report``) and the ``Document`` swaps it in; a
request handler takes the snapshot once (``Session.snapshot``) and works on it alone, so a
background run finishing meanwhile never changes what the request sees.

``Document`` keeps what is live rather than textual: the pending tier-0 and check tasks, the
edits made since the running check's text (to move its findings, shifting.py), whether
diagnostics were published, and its ``Tier0State`` (the trees and memos tier 0 reuses from one
analysis of this document to the next: analysis/tier0_state.py; nothing else analyses with it, and
it goes with the document). Its text-state properties read the current snapshot.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ..analysis.tier0_state import Tier0State
from ..analysis.types import FileReport, Finding

from .shifting import Edit, LineIndex, shift_findings


@dataclass(frozen=True)
class VersionSet:
    """The versions a document has had, as sorted runs ``(first, last)``: immutable, and adding the
    next version (the usual case) extends the last run, so a new snapshot per keystroke copies a
    few runs, not every version ever seen."""

    runs: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, version: int) -> "VersionSet":
        return cls(((version, version),))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and any(first <= version <= last for first, last in self.runs)

    def __rsub__(self, other: Any) -> set:  # {versions} - seen: those not seen
        return {v for v in other if v not in self}

    def with_version(self, version: int) -> "VersionSet":
        if version in self:
            return self
        if self.runs and self.runs[-1][1] + 1 == version:
            return VersionSet((*self.runs[:-1], (self.runs[-1][0], version)))
        return VersionSet(tuple(sorted((*self.runs, (version, version)))))


@dataclass(frozen=True)
class DocumentSnapshot:
    uri: str
    path: str
    version: int
    text: str
    analysis: Any = None  # tier0.SourceAnalysis of ``analysis_version``
    analysis_version: int | None = None
    tier0: tuple[Finding, ...] = ()  # at ``version``
    compiler: tuple[Finding, ...] = ()  # at ``version``
    report: FileReport | None = None  # the last compiler report (its verdicts for lenses and hovers)
    report_chip: str | None = None
    report_time: float | None = None
    report_version: int | None = None  # the version whose text the report checked ("edited since" when not ours)
    seen_versions: VersionSet = VersionSet()
    encoding: str = "utf-16"  # the session's position encoding (set for a request)
    settings: Any = None  # the settings of the document's workspace folder (set for a request)
    lines: LineIndex = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.lines is None or self.lines.text is not self.text:
            object.__setattr__(self, "lines", LineIndex(self.text))  # a cache of the text's line starts

    @property
    def uses_pallas(self) -> bool:
        return bool(self.analysis is not None and self.analysis.uses_pallas)

    @property
    def analysed(self) -> bool:
        return self.analysis_version == self.version

    def findings(self, severity: dict[str, str] | None = None) -> list[Finding]:
        """What the user sees: tier-0 and compiler findings, one finding per mistake (a compiler
        finding repeating a tier-0 one becomes its related "agrees" entry, the user's ``severity``
        override of the tier-0 code kept; default: the snapshot's settings')."""
        from ..engine.findings.agreement import merge_agreeing  # client side, jax-free

        if not self.compiler:
            return list(self.tier0)
        if severity is None and self.settings is not None:
            severity = dict(self.settings.severity)
        return merge_agreeing([*self.tier0, *self.compiler], self.analysis.sites if self.analysis else (), severity)

    def edited(self, version: int, edits: Sequence[Edit]) -> "DocumentSnapshot":
        """The snapshot of the text after the client's ``edits`` (in order); every finding moves with the text."""
        lines = self.lines
        for edit in edits:
            lines = lines.edited(edit)
        return replace(self, version=version, text=lines.text, lines=lines,
                       tier0=tuple(shift_findings(self.tier0, edits)), compiler=tuple(shift_findings(self.compiler, edits)),
                       seen_versions=self.seen_versions.with_version(version))

    def with_tier0(self, version: int, analysis: Any, findings: Sequence[Finding]) -> "DocumentSnapshot":
        """The source analysis and tier-0 findings of ``version`` (this snapshot's text)."""
        return replace(self, analysis_version=version, analysis=analysis, tier0=tuple(findings))

    def with_report(self, report: FileReport | None, compiler: Sequence[Finding], chip: str | None,
                    when: float | None, version: int | None = None) -> "DocumentSnapshot":
        """A compiler report of the text of ``version`` and its findings (already moved to this text)."""
        return replace(self, report=report, compiler=tuple(compiler), report_chip=chip, report_time=when,
                       report_version=version)


@dataclass
class Document:
    """An open document: its current snapshot and the work running for it."""

    snapshot: DocumentSnapshot
    tier0_task: asyncio.Task | None = None
    check_task: asyncio.Task | None = None
    check_version: int | None = None
    check_key: tuple | None = None  # (text, tiers, script) of the last started check
    edit_log: list[tuple[int, list[Edit]]] = field(default_factory=list)  # (version after, edits)
    locate_task: asyncio.Task | None = None  # the locate step after a tier-3 failure (server/checks.py)
    locate_log: list[tuple[int, list[Edit]]] = field(default_factory=list)  # edits since the located check began
    published: bool = False
    tier0_state: Tier0State = field(default_factory=Tier0State, repr=False)  # this document's alone

    @classmethod
    def opened(cls, uri: str, path: str, version: int, text: str) -> "Document":
        return cls(DocumentSnapshot(uri, path, version, text, seen_versions=VersionSet.of(version)))

    # what the current snapshot holds (read-only: a new state is a new snapshot)
    uri = property(lambda self: self.snapshot.uri)
    path = property(lambda self: self.snapshot.path)
    version = property(lambda self: self.snapshot.version)
    text = property(lambda self: self.snapshot.text)
    lines = property(lambda self: self.snapshot.lines)
    analysis = property(lambda self: self.snapshot.analysis)
    analysis_version = property(lambda self: self.snapshot.analysis_version)
    tier0 = property(lambda self: self.snapshot.tier0)
    compiler = property(lambda self: self.snapshot.compiler)
    report = property(lambda self: self.snapshot.report)
    report_chip = property(lambda self: self.snapshot.report_chip)
    report_time = property(lambda self: self.snapshot.report_time)
    report_version = property(lambda self: self.snapshot.report_version)
    seen_versions = property(lambda self: self.snapshot.seen_versions)
    uses_pallas = property(lambda self: self.snapshot.uses_pallas)

    def findings(self) -> list[Finding]:
        return self.snapshot.findings()

    def apply(self, version: int, edits: Sequence[Edit]) -> None:
        """Edits from the client, in order: a new snapshot; the running check's edits are logged."""
        self.snapshot = self.snapshot.edited(version, edits)
        if self.check_task is not None and not self.check_task.done():
            self.edit_log.append((version, list(edits)))
        if self.locate_task is not None and not self.locate_task.done():
            self.locate_log.append((version, list(edits)))

    def edits_since(self, version: int) -> list[Edit]:
        return [e for v, edits in self.edit_log if v > version for e in edits]

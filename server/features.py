"""What the editor features remember between requests, in one typed object on the session.

``Session.features`` is a ``FeatureState``: the last optimize run and autotune report per
document, the decisions step mode waits for, the open plan / diff / tests documents of step mode,
the inlay-hint sets of the last tune and optimize runs, and this session's latest timings. Nothing
is hung on the pygls server object: a handler reads ``ls.session.features`` and the module that
owns a feature (tune_lsp, optimize_lsp, inlay_hints, timing_lsp) writes its own field; the records they
keep (``Hint``/``HintSet``, ``LastTiming``, ``Tuned``) are defined here, below the feature modules.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..analysis.types import Span

if TYPE_CHECKING:  # annotations only
    from ..agents.optimize import RunState
    from ..engine.tuning.tune import TuneReport


@dataclass(frozen=True)
class Hint:
    span: Span  # the literal the hint is about (the hint sits at its end)
    literal: str  # the literal's text in the version the run started from
    label: str  # e.g. " → 256 (tuned, estimate v6e)"
    tooltip: str


@dataclass(frozen=True)
class HintSet:
    version: int  # the document version the run started from
    hints: tuple[Hint, ...] = ()


@dataclass(frozen=True)
class LastTiming:
    op: str
    entry: str
    summary: str  # timing_format.summary_line: the number and its provenance
    where: str
    when: float
    provenance: str = ""  # the candidate's, as the worker reported it ("device", "interpret", "host", ...)


@dataclass(frozen=True)
class Tuned:
    version: int  # the document version the report was computed for
    report: TuneReport


@dataclass(frozen=True)
class StepDocument:
    """The editor's copy of a step-mode plan / diff / tests document: its text and version only
    (never checked as a kernel); *Revise* reads the user's edits from here, saved or not."""

    uri: str
    path: str
    version: int
    text: str


@dataclass
class FeatureState:
    """Per-session state of the features; every field maps a document (uri or path) to its latest."""

    optimize_runs: dict[str, "RunState"] = field(default_factory=dict)  # uri -> last optimize run
    pending_decisions: dict[str, asyncio.Future] = field(default_factory=dict)  # resolved path -> step decision
    step_documents: dict[str, StepDocument] = field(default_factory=dict)  # uri -> open step document
    tune_reports: dict[str, "Tuned"] = field(default_factory=dict)  # uri -> last autotune report
    inlay_hints: dict[str, dict[str, "HintSet"]] = field(default_factory=dict)  # uri -> source -> hints
    timings: dict[str, dict[str, "LastTiming"]] = field(default_factory=dict)  # path -> entry -> latest

    def remember_hints(self, uri: str, source: str, hints: "HintSet") -> None:
        """Keep ``hints`` as the latest of ``source`` ("tune" or "optimize") for ``uri``."""
        self.inlay_hints.setdefault(uri, {})[source] = hints

    def hints_of(self, uri: str) -> list["HintSet"]:
        return list(self.inlay_hints.get(uri, {}).values())


"""Document snapshots (server/documents.py): a request's snapshot never changes under it. Edits, tier 0
and a check's report each make a new snapshot that the open document swaps in; the one a request
took keeps its text, line index, findings and analysis. Real Pallas fixture kernels, no server."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pallasite.analysis.types import FileReport, Span
from pallasite.server import checks
from pallasite.server.documents import VersionSet
from pallasite.server.session import Session
from pallasite.server.shifting import Edit, LineIndex

DATA = Path(__file__).parent / "data" / "lsp"


class Client:
    def __init__(self):
        self.shown, self.logged, self.published = [], [], []

    def window_show_message(self, params):
        self.shown.append(params)

    def window_log_message(self, params):
        self.logged.append(params)

    def text_document_publish_diagnostics(self, params):
        self.published.append(params)


def _session_with(name: str):
    session = Session(Client())
    text = (DATA / name).read_text()
    doc = session.open(f"file:///w/{name}", f"/w/{name}", 1, text)
    return session, doc, text


def test_a_request_snapshot_keeps_its_state_through_edits_and_tier0():
    session, doc, text = _session_with("tiling_broken.py")
    taken = session.snapshot(doc.uri)  # runs tier 0 first: a Pallas file
    assert taken is not None and taken.uses_pallas and "PLS001" in [f.code for f in taken.tier0]
    first_line = taken.lines[0]
    doc.apply(2, [Edit(Span(0, 0, 0, 0), "# a new first line\n")])
    session.run_tier0(doc)
    assert doc.version == 2 and doc.text.startswith("# a new first line\n")
    assert taken.version == 1 and taken.text == text and taken.lines[0] == first_line
    assert taken.lines.text is taken.text  # its line index was not edited in place
    moved = {f.code: f.span.line for f in doc.tier0}
    assert {f.code: f.span.line + 1 for f in taken.tier0 if f.code in moved} == moved  # only the new one moved


def test_snapshots_are_frozen():
    session, doc, _ = _session_with("add_ok.py")
    snap = session.snapshot(doc.uri, analysed=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.text = "x"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        doc.text = "x"  # the document's text is its snapshot's: a new state is a new snapshot


def test_a_report_makes_a_new_snapshot_with_its_findings_moved_through_later_edits():
    session, doc, _ = _session_with("tiling_broken.py")
    session.run_tier0(doc)
    before = doc.snapshot
    finding = before.tier0[0]
    compiler = dataclasses.replace(finding, tier=2, code="PLS201")
    doc.check_task = _running()
    doc.apply(2, [Edit(Span(0, 0, 0, 0), "\n\n")])  # two lines above, typed while the check ran
    checks.accept_report(session, doc, FileReport(path=doc.path, findings=(compiler,)), 1)
    assert before.compiler == () and before.report is None  # the earlier snapshot is untouched
    [shown] = doc.compiler
    assert shown.code == "PLS201" and shown.span.line == finding.span.line + 2
    assert doc.report is not None and doc.snapshot.report_chip == session.settings.target


def test_line_index_edited_leaves_the_original_alone():
    index = LineIndex("a\nbb\nccc\n")
    assert index[2] == "ccc"
    after = index.edited(Edit(Span(1, 0, 1, 2), "x\ny"))
    assert after.text == "a\nx\ny\nccc\n" and [after[i] for i in range(4)] == ["a", "x", "y", "ccc"]
    assert index.text == "a\nbb\nccc\n" and [index[i] for i in range(3)] == ["a", "bb", "ccc"]


def _running():
    class Running:
        def done(self):
            return False

        def cancel(self):
            return True

    return Running()


def test_the_versions_seen_are_kept_as_runs():
    seen = VersionSet.of(1)
    for version in range(2, 2001):
        seen = seen.with_version(version)
    assert seen.runs == ((1, 2000),) and 1500 in seen and 2001 not in seen and "3" not in seen
    jumped = seen.with_version(2005).with_version(0)
    assert jumped.runs == ((0, 0), (1, 2000), (2005, 2005)) and seen.runs == ((1, 2000),)
    assert {3, 2003, 2005} - jumped == {2003}  # what actions.py asks: the client's versions not seen

"""One tier-0 state per document (analysis/tier0_state.py): what tier 0 keeps between two analyses of
an open document (its trees, per-statement captures, ast units, kept sites, rule memo and results)
is the document's alone. The agents check candidate texts under the user's path (the fixer, the fix
action, the checker, tune, search): those analyses must leave the document's state as it was, so
that the editor's next keystroke is as fast as before the agent ran. Real fixture kernels."""

from __future__ import annotations

from pathlib import Path

from pallasite.analysis.tier0 import analyze
from pallasite.analysis.tier0_state import Tier0State
from pallasite.analysis.types import Span
from pallasite.server.session import Session
from pallasite.server.shifting import Edit

DATA = Path(__file__).parent / "data"
KERNEL = DATA / "lsp" / "tiling_broken.py"


class Client:
    def __init__(self):
        self.shown, self.logged, self.published = [], [], []

    def window_show_message(self, params):
        self.shown.append(params)

    def window_log_message(self, params):
        self.logged.append(params)

    def text_document_publish_diagnostics(self, params):
        self.published.append(params)


def _kept(state: Tier0State) -> dict:
    """What the state holds, by identity."""
    return {"tree": state.tree[1], "parsed": state.tree[0], "statements": state.statements,
            "units": state.units, "sites": dict(state.sites), "program_id": state.program_id,
            "results": dict(state.results), "earlier": list(state.earlier)}


def _candidates(text: str, n: int) -> list[str]:
    """Texts an agent would check: the kernel with one edit each (new texts, new trees)."""
    return [text.replace("import jax\n", f"import jax\nCANDIDATE = {i}\n", 1) for i in range(n)]


def _changed(before: dict, after: dict) -> list[str]:
    """The names whose object (or, for a dict or list, any item's) is not the one it was."""
    def ids(value):
        if isinstance(value, dict):
            return [(key, id(item)) for key, item in value.items()]
        return [id(item) for item in value] if isinstance(value, list) else id(value)

    return [name for name in before if ids(before[name]) != ids(after[name])]


def test_a_candidate_analysed_under_the_documents_path_leaves_its_state_untouched():
    text = KERNEL.read_text()
    path = "/w/tiling_broken.py"
    state = Tier0State()
    analyze(text, path, target="v6e", state=state)
    edited = text.replace("import jax\n", "import jax\n# typed\n", 1)
    analyze(edited, path, target="v6e", state=state)  # a second text: an earlier tree, moved sites
    assert state.tree is not None and state.units and state.sites and state.results and state.statements
    before = _kept(state)
    for candidate in _candidates(text, 12):  # what the checker, fixer and tune do with a candidate
        analyze(candidate, path, target="v6e")
        analyze(candidate, path, target="v5e", scoped_vmem=16 << 20)
    assert _changed(before, _kept(state)) == []


def test_an_open_documents_tier0_survives_an_agents_candidate_checks():
    """In the server: tier 0 of the open document, then an agent's candidate checks under its path
    (agents/fixer.py and fix_action.py analyse each candidate), then the user types a line and takes
    it back: the undo gets the document's kept result (before, the candidates' results evicted it
    from the per-path memo, and their trees replaced the document's)."""
    from pallasite.agents import fix_action, fixer

    session = Session(Client())
    text = KERNEL.read_text()
    doc = session.open("file:///w/tiling_broken.py", "/w/tiling_broken.py", 1, text)
    session.run_tier0(doc)
    first = doc.analysis
    assert first is not None and first.uses_pallas
    before = _kept(doc.tier0_state)
    for candidate in _candidates(text, 10):
        fixer._site_keys(candidate, doc.path, "v6e")
        fix_action.has_reference(candidate, doc.path, "v6e")
    assert _changed(before, _kept(doc.tier0_state)) == []
    doc.apply(2, [Edit(Span(0, 0, 0, 0), "x = 1\n")])
    session.run_tier0(doc)
    doc.apply(3, [Edit(Span(0, 0, 1, 0), "")])
    session.run_tier0(doc)
    assert doc.text == text and doc.analysis is first


def test_a_closed_document_drops_its_state():
    session = Session(Client())
    doc = session.open("file:///w/tiling_broken.py", "/w/tiling_broken.py", 1, KERNEL.read_text())
    session.run_tier0(doc)
    state = doc.tier0_state
    assert state.tree is not None and state.results
    session.close(doc.uri)
    assert state.tree is None and not state.results and not state.sites and state.units is None
    again = session.open("file:///w/tiling_broken.py", "/w/tiling_broken.py", 1, KERNEL.read_text())
    assert again.tier0_state is not state and again.tier0_state.tree is None  # a reopened document starts afresh

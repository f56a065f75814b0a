"""Tier 0 keeps what it can between two analyses of one file: the result of a text the file had a
moment ago (an undo, a statement typed and removed: ``analysis/tier0_memo.py``), and each kernel's
reading for the write rules while its function's text is unchanged (``rules/writes.py``). Both must
answer what a full analysis answers."""

from __future__ import annotations

import os

from pallasite.analysis import tier0_memo
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.tier0_state import Tier0State
from pallasite.analysis.types import to_json

DATA = os.path.join(os.path.dirname(__file__), "data", "tier0")
PATH = "/virtual/memo/kernel.py"


def _text(name: str) -> str:
    return open(os.path.join(DATA, name), encoding="utf-8").read()


def _codes(analysis) -> list[tuple[str, int]]:
    return [(f.code, f.span.line) for f in analysis.findings]


def test_an_undone_edit_gets_the_kept_result_and_it_equals_a_full_analysis():
    key = Tier0State()
    text = _text("pls017_output_unwritten_ok.py")
    first = analyze(text, PATH, target="v5e", state=key)
    edited = analyze(text.replace("def split(x):", "def split(x):\n    unused = 1"), PATH, target="v5e", state=key)
    again = analyze(text, PATH, target="v5e", state=key)
    assert again is first  # kept, not read again
    assert to_json(again.findings) == to_json(analyze(text, None, target="v5e").findings)
    assert edited is not first
    # another chip or scoped-VMEM limit is another question: not answered from the kept result
    assert analyze(text, PATH, target="v5p", state=key) is not first
    assert analyze(text, PATH, target="v5e", scoped_vmem=1 << 20, state=key) is not first
    key.clear()  # a closed document: its results go with it
    assert tier0_memo.get(key, tier0_memo.signature(PATH, text.encode(), "v5e", None)) is None
    assert analyze(text, PATH, target="v5e", state=key) is not first


def test_big_texts_are_not_kept():
    assert tier0_memo.signature(None, b"x" * (tier0_memo.MAX_TEXT_BYTES + 1), "v5e", None) is None


def test_a_kernel_edited_between_analyses_is_read_again_by_the_write_rules():
    """The write rules keep each kernel's reading on its def node; an edit to the kernel (a new
    unit, new nodes) must be read anew, and an edit elsewhere must leave the answer as it was."""
    key = Tier0State()
    ok = _text("pls017_output_unwritten_ok.py")
    assert "PLS017" not in {c for c, _ in _codes(analyze(ok, PATH, target="v5e", state=key))}
    broken = ok.replace("    _store_negative(x, neg_ref)\n", "    neg = jnp.minimum(x, 0.0)\n")
    assert "PLS017" in {c for c, _ in _codes(analyze(broken, PATH, target="v5e", state=key))}
    elsewhere = broken.replace("def example_inputs():", "def example_inputs():\n    unused = 2")
    incremental = analyze(elsewhere, PATH, target="v5e", state=key)
    assert _codes(incremental) == _codes(analyze(elsewhere, None, target="v5e"))
    assert "PLS017" in {c for c, _ in _codes(incremental)}
    fixed_again = ok.replace("def example_inputs():", "def example_inputs():\n    unused = 2")
    assert "PLS017" not in {c for c, _ in _codes(analyze(fixed_again, PATH, target="v5e", state=key))}
    key.clear()


def _kernel_def(key: Tier0State, name: str):
    for unit in key.units or ():
        for stmt in unit.stmts:
            if getattr(stmt, "name", None) == name:
                return stmt
    return None


def test_the_kernel_reading_is_kept_for_files_up_to_a_size(monkeypatch):
    """Kept on the def node for an ordinary file; not for a big one (it would raise the server's
    memory high-water mark and no one edits a generated file's kernels one at a time)."""
    from pallasite.analysis.rules import writes

    text = _text("pls017_output_unwritten_ok.py")
    key = Tier0State()
    analyze(text, PATH, target="v5e", state=key)
    assert getattr(_kernel_def(key, "split_kernel"), writes._READ, None) is not None
    key.clear()
    monkeypatch.setattr(writes, "KEEP_READS_BYTES", len(text.encode()) - 1)
    found = analyze(text, PATH, target="v5e", state=key)
    assert getattr(_kernel_def(key, "split_kernel"), writes._READ, None) is None
    assert _codes(found) == _codes(analyze(text, None, target="v5e"))
    key.clear()

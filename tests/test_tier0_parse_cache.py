"""Tier 0 re-parses a document it has seen before incrementally (``analyze(text, path, state=...)``:
the document's ``Tier0State`` keeps its last tree): the result must be exactly what a fresh parse gives, for any edit, and
trees already handed out must not change underneath their ``Source``."""

from __future__ import annotations

import os

import pytest

from pallasite.analysis import source as source_mod
from pallasite.analysis.rules.apis import jax_root
from pallasite.analysis.source import Source, parse, text_edit
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.tier0_state import Tier0State
from pallasite.analysis.types import to_json


def _splash() -> str | None:
    root = jax_root()
    if root is None:
        return None
    path = os.path.join(root, "experimental", "pallas", "ops", "tpu", "splash_attention", "splash_attention_kernel.py")
    return open(path, encoding="utf-8").read() if os.path.exists(path) else None


SPLASH = _splash()


def _edits(text: str) -> list[str]:
    """A sequence of texts, each one edit away from the one before."""
    rows = text.split("\n")
    mid = len(rows) // 2
    out = [text]
    out.append("\n".join(rows[:mid] + ["# a comment line with ünïcödé"] + rows[mid:]))  # insert
    out.append(out[-1].replace("block_q", "block_q_renamed", 1))  # replace a token, longer
    out.append(out[-1][: len(out[-1]) // 3] + out[-1][len(out[-1]) // 3 + 500:])  # delete a chunk (may break syntax)
    out.append("import os\n" + out[-1])  # edit at the start
    out.append(out[-1] + "\nx = (\n")  # an unfinished statement at the end
    out.append(out[-1][:-len("\nx = (\n")])  # and back
    out.append(text)  # back to the original
    out.append("")  # everything deleted
    out.append(text)
    return out


@pytest.mark.skipif(SPLASH is None, reason="jax's splash attention kernel is not installed")
def test_incremental_parse_equals_a_fresh_parse_for_every_edit():
    key = Tier0State()
    for text in _edits(SPLASH):
        incremental = parse(text, key)
        fresh = parse(text)
        assert str(incremental.root_node) == str(fresh.root_node)
        assert incremental.root_node.end_byte == len(text.encode("utf-8"))


@pytest.mark.skipif(SPLASH is None, reason="jax's splash attention kernel is not installed")
def test_analysis_with_a_state_equals_the_analysis_without_one():
    key = Tier0State()
    for text in _edits(SPLASH)[:4]:
        keyed, plain = analyze(text, "/virtual/splash_analysis.py", state=key), analyze(text, None)
        assert to_json(keyed.sites) == to_json(plain.sites)
        assert to_json(keyed.findings) == to_json(plain.findings)


def test_unchanged_text_reuses_the_tree_and_old_sources_stay_valid():
    key = Tier0State()
    text = "import jax\nfrom jax.experimental import pallas as pl\nBLOCK = 128\n"
    first = Source(text, state=key)
    assert Source(text, state=key).tree is first.tree
    edited = text.replace("BLOCK = 128", "BLOCK = 256\nOTHER = 8")
    second = Source(edited, state=key)
    assert second.tree is not first.tree
    assert first.constants["BLOCK"].value == 128 and second.constants["BLOCK"].value == 256
    node = first.root.named_children[-1]
    assert first.node_text(node) == "BLOCK = 128"  # the old tree was not edited in place


@pytest.mark.parametrize("old,new", [
    (b"abc", b"abXc"), (b"abc", b"c"), (b"", b"x\ny"), (b"a\nb\nc", b"a\nc"), (b"same", b"same"),
    (b"aaaa", b"aa"),
])
def test_text_edit_describes_the_change(old, new):
    edit = text_edit(old, new)
    start, old_end, new_end = edit["start_byte"], edit["old_end_byte"], edit["new_end_byte"]
    assert old[:start] + new[start:new_end] + old[old_end:] == new
    assert old[:start] == new[:start] and old[old_end:] == new[new_end:]
    row, column = edit["new_end_point"]
    assert new[:new_end].count(b"\n") == row and column == new_end - (new[:new_end].rfind(b"\n") + 1)


def test_an_undo_gets_its_earlier_tree_back_without_a_parse(monkeypatch):
    key = Tier0State()
    text = "import jax\n\n\ndef f(x):\n    y = x + 1\n    return y\n"
    edited = text.replace("    return y", "    _probe = 1\n    return y")
    try:
        first = parse(text, key)
        second = parse(edited, key)
        parsed = []
        real = source_mod._parse
        monkeypatch.setattr(source_mod, "_parse", lambda data, k, *known: parsed.append(data) or real(data, k, *known))
        data = text.encode("utf-8")
        assert source_mod.parse_bytes(data, key) is first and not parsed  # an undo
        assert source_mod._parsed_as(key, data)  # the per-statement captures still follow the tree
        assert parse(edited, key) is second and not parsed  # a redo
        third = parse(edited.replace("_probe = 1", "_probe = 2"), key)  # from the redone tree: one edit
        assert len(parsed) == 1 and str(third.root_node) == str(parse(edited.replace("_probe = 1", "_probe = 2")).root_node)
    finally:
        source_mod.forget(key)
    assert key.tree is None and not key.earlier


def test_undo_and_redo_sequences_equal_fresh_parses():
    import random

    rng = random.Random(5)
    key = Tier0State()
    comments = "\n".join(f"# comment {i}" for i in range(source_mod.MASK_RUN + 3))  # a run blanked for the parse
    base = f"import jax\n{comments}\n\ndef f(x):\n    s = '''\n# not a comment\n'''\n    return x\n"
    history = [base]
    try:
        for _ in range(60):
            kind = rng.random()
            if kind < 0.4 and len(history) > 1:
                text = history[rng.randrange(len(history))]  # back to a text seen before
            else:
                rows = history[-1].split("\n")
                i = rng.randrange(len(rows) + 1)
                rows.insert(i, rng.choice(["    _probe = 1", "# c", "x = (", "", "    return 2"]))
                text = "\n".join(rows)
            history.append(text)
            tree = parse(text, key)
            assert str(tree.root_node) == str(parse(text).root_node)
            assert tree.root_node.end_byte == len(text.encode("utf-8"))
    finally:
        source_mod.forget(key)


def test_an_incremental_parse_finds_its_edit_once(monkeypatch):
    """The comment-run check around the edit and the incremental parse share one ``text_edit``."""
    key = Tier0State()
    text = "import jax\n\n\ndef f(x):\n    return x\n"
    try:
        parse(text, key)
        asked = []
        real = source_mod._text_edit
        monkeypatch.setattr(source_mod, "_text_edit", lambda old, new: asked.append(1) or real(old, new))
        edited = text.replace("    return x", "    y = 1\n    return x")
        tree = parse(edited, key)
        assert len(asked) == 1 and str(tree.root_node) == str(parse(edited).root_node)
    finally:
        source_mod.forget(key)

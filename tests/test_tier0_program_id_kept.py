"""PLS006 keeps each kernel's findings across edits (analysis/rules/kernel.program_id_control_flow):
a kernel whose function text, column, the file's imports and the kernel's name are unchanged keeps
its findings, moved to the kernel's new line, fix included; any of those changed reads it again.
Every result equals a full analysis."""

from __future__ import annotations

import os

from pallasite.analysis.rules import kernel as kernel_rules
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.tier0_state import Tier0State

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "tier0", "pls006_program_id_if_bad.py")
PATH = "/virtual/pls006_kept.py"


def _pls006(text: str, state: Tier0State | None) -> list:
    return [f for f in analyze(text, PATH, state=state).findings if f.code == "PLS006"]


def test_kept_findings_move_with_the_kernel_and_equal_a_full_read():
    with open(FIXTURE, encoding="utf-8") as handle:
        text = handle.read()
    key = Tier0State()
    texts = [
        text,
        text.replace("import jax\n", "import jax\n# one\n# two\n", 1),  # the kernel two lines down: kept, moved
        text.replace("import jax\n", "import jax\n# one\n", 1),  # one line up again: kept, moved
        text.replace("if k == 0:", "if k == 0 :"),  # the kernel's text changed: read again
        text.replace("if k == 0:", "if k == 0 :").replace("as pl\n", "as pl\nimport numpy as np\n"),  # imports
        text.replace("from jax.experimental import pallas as pl", "from jax.experimental import pallas as plx")
            .replace("pl.", "plx."),  # another alias: the fix says plx.when
    ]
    for edited in texts:
        assert _pls006(edited, key) == _pls006(edited, None), edited
    kept = _pls006(texts[1], key)
    assert kept and kept[0].span.line == _pls006(text, None)[0].span.line + 2
    assert kept[0].fix is not None and kept[0].fix.edits[0].span.line == kept[0].span.line
    assert "plx.when" in _pls006(texts[-1], key)[0].fix.edits[0].new_text
    assert key.program_id
    key.clear()
    assert not key.program_id


def test_a_moved_kernel_is_not_read_again(monkeypatch):
    """The first text reads the kernel; moving it reads nothing; changing it reads it again."""
    with open(FIXTURE, encoding="utf-8") as handle:
        text = handle.read()
    key = Tier0State()
    calls = []
    real = kernel_rules._program_id_findings
    monkeypatch.setattr(kernel_rules, "_program_id_findings", lambda *a: (calls.append(1), real(*a))[1])
    analyze(text, PATH, state=key)
    analyze("# moved\n" + text, PATH, state=key)
    assert len(calls) == 1
    analyze("# moved\n" + text.replace("if k == 0:", "if 0 == k:"), PATH, state=key)
    assert len(calls) == 2

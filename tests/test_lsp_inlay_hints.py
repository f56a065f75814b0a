"""Inlay hints after an autotune, end to end over stdio: the tuned value beside each tunable literal
the best configuration changes, with the estimate's provenance; none before a run; a hint stays
while its literal is still in place and goes once an edit moves or replaces it. (The optimize
run's hints are checked in test_lsp_optimize.py.)"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import from_fs_path
import pytest

from test_lsp import answer_trust, change, client, diagnostics_for, initialize, open_doc  # noqa: F401

TUNE = Path(__file__).parent / "data" / "tune"
DEFAULTS = {"bm": 256, "bn": 256, "bk": 512}


async def hints(client, uri: str) -> list[lsp.InlayHint]:
    return list(await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(200, 0)))) or [])


@pytest.mark.pipeline
async def test_autotune_inlay_hints_follow_the_document(client, tmp_path):
    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "matmul.py"
    shutil.copy(TUNE / "matmul.py", path)
    uri, text = from_fs_path(str(path)), path.read_text()
    await initialize(client, folder, {"target": "v5e", "tiers": [0], "check": {"onOpen": False}})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    assert await hints(client, uri) == []  # no run known
    result = await asyncio.wait_for(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.autotune", arguments=[{"uri": uri, "verify": 0}])), 240)
    assert result["ok"] is True and result["provenance"] == "estimate (v5e)", result
    changed = {k: v for k, v in result["best"].items() if v != DEFAULTS[k]}
    assert changed, result  # the fixture's defaults are not the estimate's best
    line_no = next(i for i, s in enumerate(text.splitlines()) if s.startswith("def matmul("))
    line = text.splitlines()[line_no]
    found = await hints(client, uri)
    expected = {(line_no, line.index(f"{name}: int = ") + len(f"{name}: int = {DEFAULTS[name]}")):
                f" → {value} (tuned, estimate v5e)" for name, value in changed.items()}
    assert {(h.position.line, h.position.character): h.label for h in found} == expected
    # an edit on another line: the literals are still in place, the hints stay
    change(client, uri, 2, (len(text.splitlines()) - 1, 0), (len(text.splitlines()) - 1, 0), "# note\n")
    assert len(await hints(client, uri)) == len(expected)
    # the user types over the rightmost changed literal: its hint goes, the others (left of it) stay
    name = max(changed, key=lambda n: line.index(f"{n}: int = "))
    start = line.index(f"{name}: int = ") + len(f"{name}: int = ")
    change(client, uri, 3, (line_no, start), (line_no, start + len(str(DEFAULTS[name]))), "64")
    assert len(await hints(client, uri)) == len(expected) - 1

"""Optimize through the language server, step by step: plan documents opened by showDocument,
approve / revise commands (the user's edits to the plan file are the instruction), the winner
written beside the original, and the hover on the kernel showing the run."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.uris import from_fs_path, to_fs_path

from test_lsp import answer_trust, client, diagnostics_for, initialize, open_doc  # noqa: F401

DATA = Path(__file__).parent / "data" / "optimize"


def replies(*names: str) -> list[str]:
    out = []
    for name in names:
        out += [f"Try {name}\nbecause.", "```python\n" + (DATA / "candidates" / f"{name}.py").read_text() + "```"]
    return out


async def test_step_mode_approve_revise_approve(client, tmp_path):
    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "add.py"
    shutil.copy(DATA / "add.py", path)
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies("wrong_math", "big_blocks")))
    uri, text = from_fs_path(str(path)), path.read_text()
    await initialize(client, folder, {"target": "v6e", "tiers": [0, 1], "check": {"onOpen": False},
                                      "agent": {"provider": "scripted", "scriptedFile": str(script)}})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert {"Optimize", "Optimize step by step"} <= {lens.command.title for lens in lenses}
    run = asyncio.ensure_future(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "step", "iterations": 2}])))

    async def next_shown(count: int) -> str:
        for _ in range(2400):
            shown = [params.uri for params in client.shown_documents]
            if len(shown) >= count:
                return shown[count - 1]
            assert not run.done(), run.result()
            await asyncio.sleep(0.05)
        raise AssertionError(f"no document shown (shown: {client.shown_documents})")

    async def decide(command: str, doc_uri: str):
        result = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
            command=command, arguments=[{"uri": doc_uri}]))
        assert result["ok"], result

    plan1 = await next_shown(1)
    assert plan1.endswith("-1.md") and "/.pallasite/plans/" in plan1
    plan_lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(plan1)))
    assert [lens.command.command for lens in plan_lenses] == ["pallasite.optimize.approve", "pallasite.optimize.revise",
                                                              "pallasite.optimize.stop"]
    await decide("pallasite.optimize.approve", plan1)
    diff1 = await next_shown(2)
    assert diff1.endswith("-1.diff") and "-    o_ref[...] = x_ref[...] + y_ref[...]" in Path(to_fs_path(diff1)).read_text()
    await decide("pallasite.optimize.approve", diff1)
    plan2 = await next_shown(3)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(  # the editor opens it
        uri=plan2, language_id="markdown", version=1, text=Path(to_fs_path(plan2)).read_text())))
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(  # and the engineer rewrites it (unsaved)
        text_document=lsp.VersionedTextDocumentIdentifier(uri=plan2, version=2),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(
            text="Use 128-row blocks, keep the add\nEdited by the engineer.\n")]))
    await decide("pallasite.optimize.revise", plan2)  # the edited file is the plan
    diff2 = await next_shown(4)
    await decide("pallasite.optimize.approve", diff2)
    result = await asyncio.wait_for(run, 300)
    assert [r["verdict"] for r in result["table"]] == ["incorrect", "valid"], result
    assert result["table"][1]["plan"] == "Use 128-row blocks, keep the add"
    assert result["method"] == "estimate (v6e)" and result["speedup"] > 1
    assert Path(result["written"]).read_text() == (DATA / "candidates" / "big_blocks.py").read_text()
    assert path.read_text() == text  # the original is untouched (winner: a new file beside it)
    line = next(i for i, s in enumerate(text.splitlines()) if "pl.pallas_call(" in s)
    column = text.splitlines()[line].index("pallas_call") + 2
    hover = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                    lsp.Position(line, column)))
    assert "vs the original file" in hover.contents.value and "estimate (v6e)" in hover.contents.value
    assert "| 2 * | valid |" in hover.contents.value

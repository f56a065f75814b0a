"""Autotune in the editor, end to end over stdio with a real worker: the lens, the command with
progress, the hover on a tunable, and the versioned "Apply autotuned ..." code action."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import from_fs_path
import pytest

from test_lsp import answer_trust, client, diagnostics_for, initialize, open_doc  # noqa: F401

TUNE = Path(__file__).parent / "data" / "tune"


@pytest.mark.pipeline
async def test_autotune_lens_command_hover_and_apply_action(client, tmp_path):
    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)  # this workspace's own results store
    path = folder / "matmul.py"
    shutil.copy(TUNE / "matmul.py", path)
    uri, text = from_fs_path(str(path)), path.read_text()
    await initialize(client, folder, {"target": "v5e", "tiers": [0], "check": {"onOpen": False}})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert [lens.command.title for lens in lenses if lens.command.command == "pallasite.autotune"] == ["Autotune for v5e"]
    result = await asyncio.wait_for(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.autotune", arguments=[{"uri": uri, "verify": 0}])), 240)
    assert result["ok"] is True, result
    assert result["provenance"] == "estimate (v5e)" and result["job"].startswith("job-")  # an engine job
    best = result["best"]
    kinds = [[type(v).__name__ for v in values] for values in client.progress_reports.values()]
    assert kinds and kinds[-1][0] == "WorkDoneProgressBegin" and kinds[-1][-1] == "WorkDoneProgressEnd"
    line = next(i for i, s in enumerate(text.splitlines()) if s.startswith("def matmul("))
    column = text.splitlines()[line].index("bm:")
    hover = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                    lsp.Position(line, column + 1)))
    assert f"best bm = {best['bm']}" in hover.contents.value and "estimate (v5e)" in hover.contents.value
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)),
        lsp.CodeActionContext(diagnostics=[])))
    apply = [a for a in actions if a.title.startswith("Apply autotuned")]
    assert len(apply) == 1 and "estimate (v5e)" in apply[0].title
    (doc_edit,) = apply[0].edit.document_changes
    assert doc_edit.text_document.version == 1  # tied to the version that was tuned
    new = {e.new_text for e in doc_edit.edits}
    changed = {str(v) for k, v in best.items() if v != {"bm": 256, "bn": 256, "bk": 512}[k]}
    assert new == changed
    assert path.read_text() == text  # nothing written without the user choosing the action


async def test_autotune_is_cancelled_from_its_progress(client, tmp_path):
    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "slow_import.py"
    shutil.copy(TUNE / "slow_import.py", path)
    uri, text = from_fs_path(str(path)), path.read_text()
    await initialize(client, folder, {"target": "v5e", "tiers": [0], "check": {"onOpen": False}})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    pending = asyncio.ensure_future(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.autotune", arguments=[{"uri": uri, "verify": 0}])))
    for _ in range(200):
        if client.progress_reports:
            break
        await asyncio.sleep(0.05)
    token = next(iter(client.progress_reports))
    await asyncio.sleep(1.0)
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(pending, 20)
    assert result == {"ok": False, "message": "cancelled"}
    assert type(client.progress_reports[token][-1]).__name__ == "WorkDoneProgressEnd"

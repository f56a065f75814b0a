"""Time and Profile in the editor, end to end over stdio: the lenses, the command with its
progress, the result in the lens title and in the kernel hover with its provenance, and the
results store. The worker runs locally on CPU: every number is labelled CPU interpret."""

from __future__ import annotations

import pytest

import asyncio
import shutil
from pathlib import Path

from lsprotocol import types as lsp
from pygls.uris import from_fs_path

from test_lsp import answer_trust, client, initialize, open_doc, raw_request  # noqa: F401  (client is a fixture)

TIMING = Path(__file__).parent / "data" / "timing"


async def lenses(client, uri: str) -> list[str]:
    found = await client.text_document_code_lens_async(lsp.CodeLensParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri)))
    return [lens.command.title for lens in found]


@pytest.mark.pipeline
async def test_time_lens_runs_the_command_and_the_result_shows_with_its_provenance(client, tmp_path):
    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "pyproject.toml").write_text("[project]\nname = 'kernels'\n")  # the workspace: the store goes here
    path = folder / "honest_add.py"
    shutil.copy(TIMING / "honest_add.py", path)
    uri, text = from_fs_path(str(path)), path.read_text()
    refreshed = client.lens_refreshes  # test_lsp.make_client records each workspace/codeLens/refresh
    await initialize(client, folder, {"tiers": [0], "check": {"onOpen": False}})
    open_doc(client, uri, text)
    titles = await lenses(client, uri)
    assert "Time on local" in titles and "Profile on local" in titles

    asked = len(refreshed)  # refreshes before the run (settings arriving) do not count
    result = await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.time", arguments=[{"uri": uri, "entry": "add", "runs": 2, "warmup": 1}])), 240)
    assert result["ok"] is True and result["status"] == "ok", result
    # an interpret-mode run is never a speedup (issue 23): the summary gives the time and its provenance only
    assert "CPU interpret mode: not TPU time" in result["summary"] and "x vs" not in result["summary"]
    assert result["where"] == "local" and "worker on local" in result["worker"]
    kinds = [[type(v).__name__ for v in values] for values in client.progress_reports.values()]
    assert kinds and kinds[-1][0] == "WorkDoneProgressBegin" and kinds[-1][-1] == "WorkDoneProgressEnd"

    for _ in range(50):
        if len(refreshed) > asked:
            break
        await asyncio.sleep(0.1)
    assert len(refreshed) > asked, "the server did not ask the client to refresh its lenses"
    assert any(t.startswith("Time on local (last: ") and "CPU interpret" in t for t in await lenses(client, uri))
    kernel_line = next(i for i, line in enumerate(text.splitlines()) if line.startswith("def add_kernel"))
    hover = await client.text_document_hover_async(lsp.HoverParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), position=lsp.Position(kernel_line, 5)))
    assert "**measured" not in hover.contents.value  # interpret-mode time is not a measurement of a TPU
    assert "**estimated, or not TPU time**" in hover.contents.value and "x vs" not in hover.contents.value
    assert "CPU interpret mode: not TPU time" in hover.contents.value and "this session" in hover.contents.value
    assert (folder / ".pallasite" / "results.sqlite").is_file()
    stats = await raw_request(client, "pallasite/serverStats", None)
    assert [(j["kind"], j["state"], j["file"]) for j in stats["jobs"] if j["kind"] == "time"] == [
        ("time", "done", str(path))]  # it ran as an engine job


async def test_time_command_refuses_bad_arguments_and_untrusted_folders(client, tmp_path):
    answer_trust(client, "Not now")
    folder = tmp_path / "ws"
    folder.mkdir()
    path = folder / "honest_add.py"
    shutil.copy(TIMING / "honest_add.py", path)
    uri = from_fs_path(str(path))
    await initialize(client, folder, {"tiers": [0]})
    open_doc(client, uri, path.read_text())
    untrusted = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.time", arguments=[{"uri": uri}]))
    assert untrusted["ok"] is False and "not trusted" in untrusted["message"]
    missing = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.profile", arguments=[{"uri": "file:///nowhere.py"}]))
    assert missing["ok"] is False and "not an open document" in missing["message"]

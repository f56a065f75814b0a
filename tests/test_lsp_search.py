"""'Search for a faster kernel' end to end through the language server, with the scripted provider:
the node is estimated and checked in a worker, the best node comes back as a versioned edit, the
report is opened through window/showDocument, and the search's nodes are in the results store."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp.client import register_lsp_features

from test_lsp import answer_trust, initialize, open_doc, start_client, stop_client  # noqa: F401

ROOT = (Path(__file__).parent / "data" / "search" / "add_reference.py").read_text()


def _apply(ls, params):
    ls.applied_edits.append(params)
    return lsp.ApplyWorkspaceEditResult(applied=True)


@pytest_asyncio.fixture
async def client(tmp_path):
    c = await start_client(tmp_path / "home")
    c.applied_edits = []
    register_lsp_features(c, {lsp.WORKSPACE_APPLY_EDIT: _apply})  # window/showDocument: pytest-lsp records it
    yield c
    await stop_client(c)


async def test_search_offers_the_best_node_and_opens_the_report(client, tmp_path):
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "add.py"
    path.write_text(ROOT)
    faster = re.sub(r"BLOCK_ROWS = \d+", "BLOCK_ROWS = 64", ROOT)
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([json.dumps({"plan": "bigger blocks: fewer grid steps", "source": faster})]))
    answer_trust(client, "Trust")
    await initialize(client, folder, {"tiers": [0], "target": "v5e",
                                      "agent": {"provider": "scripted", "scriptedFile": str(script)}})
    open_doc(client, path.as_uri(), ROOT)
    result = await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.search", arguments=[{"uri": path.as_uri(), "algo": "parallel", "trajectories": 1,
                                                "iterations": 1}])), 240)
    result = result if isinstance(result, dict) else result._asdict()
    assert result["ok"], result
    assert result["best"] == "t0.1" and result["provenance"].startswith("estimate (v5e)")
    assert result["applied"]
    (edit,) = client.applied_edits
    change = edit.edit.document_changes[0]
    assert change.text_document.version == 1 and change.edits[0].new_text == faster
    (shown,) = client.shown_documents
    assert shown.uri.endswith(".html") and Path(result["report"]).is_file()
    page = Path(result["report"]).read_text()
    assert 'data-plot="graph"' in page and "estimate (v5e)" in page
    graph = json.loads(Path(result["report"]).with_suffix(".json").read_text())
    assert [n["id"] for n in graph["nodes"]] == ["root", "t0.1"]
    # 64-row blocks need 8x fewer grid steps than the root's 8: the estimate must say it is faster
    root, node = graph["nodes"]
    assert node["speedup"] == result["speedup"] > root["speedup"]

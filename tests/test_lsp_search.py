"""'Search for a faster kernel' end to end through the language server, with the scripted provider:
the node is one optimize iteration, tested and estimated in the server's workers; the best node
comes back as a versioned edit, the report is opened through window/showDocument, and the search's
nodes are in the results store. A search cancelled mid-node (workDoneProgress cancel, or
$/cancelRequest) ends its job, keeps its finished nodes (the next run resumes), stops the node's code
in its worker, and the server keeps answering; no worker outlives the server."""

from __future__ import annotations

import asyncio
import json
import time
import re
from pathlib import Path

import pytest_asyncio
from lsprotocol import types as lsp
import pytest
from pytest_lsp.client import register_lsp_features

from pallasite.analysis.verdict import COST_MODEL

from test_lsp import answer_trust, initialize, open_doc, start_client, stop_client  # noqa: F401

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

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
    if not getattr(c, "stopped_here", False):
        await stop_client(c)


def rows(source: str) -> int:
    return int(re.search(r"BLOCK_ROWS = (\d+)", source).group(1))


async def test_search_offers_the_best_node_and_opens_the_report(client, tmp_path):
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "add.py"
    path.write_text(ROOT)
    faster = re.sub(r"BLOCK_ROWS = \d+", "BLOCK_ROWS = 64", ROOT)
    script = tmp_path / "replies.json"
    # one node = one optimize iteration: the planner's reply, then the implementer's
    script.write_text(json.dumps(["Bigger blocks: fewer grid steps\nUse 64-row blocks.", f"```python\n{faster}```"]))
    answer_trust(client, "Trust")
    await initialize(client, folder, {"tiers": [0], "target": "v5e",
                                      "agent": {"provider": "scripted", "scriptedFile": str(script)}})
    open_doc(client, path.as_uri(), ROOT)
    result = await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.search", arguments=[{"uri": path.as_uri(), "algo": "parallel", "trajectories": 1,
                                                "iterations": 1}])), 240)
    result = result if isinstance(result, dict) else result._asdict()
    assert result["ok"], result
    graph = json.loads(Path(result["report"]).with_suffix(".json").read_text())
    assert result["best"] == "t0.1", graph["nodes"][1]
    assert result["best"] == "t0.1" and result["provenance"].startswith(f"estimate ({COST_MODEL}, v5e)")
    assert result["applied"]
    (edit,) = client.applied_edits
    change = edit.edit.document_changes[0]
    # the node is the candidate after the loop's autotune phase (its BLOCK_ROWS tuned for v5e)
    best = graph["nodes"][1]
    assert best["plan"].startswith("Bigger blocks") and rows(best["source"]) >= rows(faster)
    assert change.text_document.version == 1 and change.edits[0].new_text == best["source"]
    (shown,) = client.shown_documents
    assert shown.uri.endswith(".html") and Path(result["report"]).is_file()
    page = Path(result["report"]).read_text()
    assert 'data-plot="graph"' in page and f"estimate ({COST_MODEL}, v5e)" in page
    graph = json.loads(Path(result["report"]).with_suffix(".json").read_text())
    assert [n["id"] for n in graph["nodes"]] == ["root", "t0.1"]
    # 64-row blocks (tuned further by the autotune phase) need fewer grid steps than the root's 8: faster by the estimate
    root, node = graph["nodes"]
    assert node["speedup"] == result["speedup"] > root["speedup"] == 1.0
    assert node["loop_word"] == "valid" and [p["phase"] for p in node["phases"]][-3:] == ["test", "autotune", "profile"]
    # the editor's search records each node's model calls as the CLI does (replayable with replay:<run>/<node>)
    from pallasite.knowledge.store import ResultsStore

    store = ResultsStore.open(folder)
    calls = store.llm_calls(f"{result['run']}/t0.1")
    store.close()
    assert [c.response for c in calls] == json.loads(script.read_text())


HANG = '''import time as _time

_beat = 0
try:
    while _beat < 2400:  # a heartbeat in the mark every 0.05 s for 120 s: its pid may be a namespace's own
        _beat += 1
        with open({mark!r}, "w") as _f:
            _f.write(str(_beat))
        _time.sleep(0.05)
finally:  # reached when the worker interrupts the running request (not when it is killed)
    with open({mark!r} + ".stopped", "w") as _f:
        _f.write("stopped")
'''


def _beating(mark: Path) -> bool:
    """Whether the hanging code still writes its heartbeat (a new count within 0.5 s)."""
    before = mark.read_text()
    time.sleep(0.5)
    return mark.read_text() != before


@pytest.mark.parametrize("how", ["progress", "cancelRequest"])
async def test_search_cancelled_mid_run_keeps_its_nodes_resumes_and_orphans_no_worker(client, tmp_path, how):
    import psutil

    from test_lsp import raw_request

    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "add.py"
    path.write_text(ROOT)
    mark = tmp_path / "hanging.pid"
    fast = re.sub(r"BLOCK_ROWS = \d+", "BLOCK_ROWS = 64", ROOT)
    hangs = HANG.format(mark=str(mark)) + ROOT  # the second node's candidate hangs when its test imports it
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["Bigger blocks\n64 rows.", f"```python\n{fast}```",
                                  "Sleep first\nA slow import.", f"```python\n{hangs}```"]))
    answer_trust(client, "Trust")
    await initialize(client, folder, {"tiers": [0], "target": "v5e", "check": {"onOpen": False},
                                      "worker": {"sandbox": "off"},  # the marked pid is the host's
                                      # ... and the model's code may write the mark here (user's opt-in)
                                      "agent": {"provider": "scripted", "scriptedFile": str(script),
                                                "allowUnconfined": True}})
    open_doc(client, path.as_uri(), ROOT)
    server = psutil.Process((await raw_request(client, "pallasite/serverStats", None))["pid"])
    args = [{"uri": path.as_uri(), "algo": "parallel", "trajectories": 1, "iterations": 3}]
    pending = asyncio.wrap_future(client.protocol.send_request(
        lsp.WORKSPACE_EXECUTE_COMMAND, lsp.ExecuteCommandParams(command="pallasite.search", arguments=args),
        msg_id="search-to-cancel"))
    for _ in range(1200):  # until the second node's test is running the hanging import
        if mark.exists() and mark.read_text():
            break
        await asyncio.sleep(0.05)
    assert mark.exists(), "the second node's test never started"
    token = next(t for t, reports in client.progress_reports.items()
                 if any("Searching" in (getattr(r, "title", "") or "") for r in reports))
    messages = [getattr(r, "message", "") or "" for r in client.progress_reports[token]]
    assert any(m.startswith("node t0.1:") for m in messages)  # the first node finished and was reported
    if how == "progress":
        client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    else:
        client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="search-to-cancel"))
    result = None
    try:
        result = await asyncio.wait_for(pending, 30)
    except asyncio.TimeoutError:
        raise
    except Exception as exc:  # $/cancelRequest: the request may be answered with RequestCancelled
        assert how == "cancelRequest" and "cancel" in str(exc).lower(), exc
    if result is not None:
        result = result if isinstance(result, dict) else result._asdict()
        assert not result["ok"] and result["message"].startswith("cancelled"), result
    for _ in range(100):
        if type(client.progress_reports[token][-1]).__name__ == "WorkDoneProgressEnd":
            break
        await asyncio.sleep(0.05)
    assert type(client.progress_reports[token][-1]).__name__ == "WorkDoneProgressEnd"
    # the cancelled node's code stopped running: its worker interrupted it (and stays, idle) or was killed
    stopped = Path(str(mark) + ".stopped")
    for _ in range(30):
        if stopped.exists() or not _beating(mark):
            break
        await asyncio.sleep(0.05)
    assert stopped.exists() or not _beating(mark), "the cancelled node's code is still running"
    # the server keeps answering
    stats = await asyncio.wait_for(raw_request(client, "pallasite/serverStats", None), 10)
    assert stats["pid"] == server.pid
    # the partial graph is stored: run the command again and it resumes after t0.1
    from pallasite.knowledge.store import ResultsStore
    from pallasite.agents.run_setup import search_run_id as run_id
    from pallasite.server.editor.search_lsp import options_from

    rid = run_id(ROOT, options_from({k: v for k, v in args[0].items() if k != "uri"}), "scripted", "v5e")
    store = ResultsStore.open(folder)
    stored = [s.payload for s in store.agent_steps(rid) if s.kind == "search_node"]
    store.close()
    assert [n["id"] for n in stored] == ["root", "t0.1"] and stored[1]["plan"].startswith("Bigger blocks")
    assert rows(stored[1]["source"]) >= rows(fast)
    again = re.sub(r"BLOCK_ROWS = \d+", "BLOCK_ROWS = 128", ROOT)
    script.write_text(json.dumps(["Even bigger\n128 rows.", f"```python\n{again}```",
                                  "Same again\n128 rows.", f"```python\n{again}```"]))
    started = asyncio.get_running_loop().time()
    result = await asyncio.wait_for(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.search", arguments=args)), 240)
    result = result if isinstance(result, dict) else result._asdict()
    assert result["ok"] and result["run"] == rid, result
    assert asyncio.get_running_loop().time() - started < 100  # no worker was left sleeping in the old node
    graph = json.loads(Path(result["report"]).with_suffix(".json").read_text())
    nodes = {n["id"]: n for n in graph["nodes"]}
    assert list(nodes) == ["root", "t0.1", "t0.2", "t0.3"]
    # t0.1 was read back, not asked again: the new replies' plans start at t0.2
    assert nodes["t0.1"]["source"] == stored[1]["source"] and nodes["t0.1"]["plan"].startswith("Bigger blocks")
    assert nodes["t0.2"]["plan"].startswith("Even bigger") and nodes["t0.3"]["plan"].startswith("Same again")
    # no worker outlives the server
    family = [p for p in server.children(recursive=True)]
    await stop_client(client)
    client.stopped_here = True
    gone, alive = psutil.wait_procs(family, timeout=15)
    assert not alive, f"orphaned: {[p.pid for p in alive]}"

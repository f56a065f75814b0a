""""Fix with agent" end to end through the language server, with the scripted provider: a wrong fix
rejected by the checker and fed back, then a right one applied as a verified, versioned minimal
edit; garbage and a deleted pallas_call never reach the document; no provider says how to set one.
"""

from __future__ import annotations

import pytest

import asyncio
import json
import time

import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp.client import register_lsp_features

from test_lsp import (  # noqa: F401
    DATA, answer_trust, diagnostics_for, initialize, open_doc, raw_request, start_client, stop_client,
)
from test_fixer import DELETES_CALL, RIGHT, WRONG

AGENTS = DATA.parent / "agents"


def _record_apply(ls, params: lsp.ApplyWorkspaceEditParams):
    ls.applied_edits.append(params)
    return lsp.ApplyWorkspaceEditResult(applied=True)


@pytest_asyncio.fixture
async def client(tmp_path):
    lsp_client = await start_client(tmp_path / "home")
    lsp_client.applied_edits = []
    register_lsp_features(lsp_client, {lsp.WORKSPACE_APPLY_EDIT: _record_apply})
    yield lsp_client
    await stop_client(lsp_client)


async def open_broken(client, tmp_path, replies: list, trust: str, tiers: list[int], agent: dict | None = None):
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)  # this test's own results store (not one in a parent folder)
    path = folder / "add_bad_tiling.py"
    path.write_text((AGENTS / "add_bad_tiling.py").read_text())
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies))
    answer_trust(client, trust)
    settings = {"tiers": tiers, "agent": {"provider": "scripted", "scriptedFile": str(script), "docsPassages": 0,
                                          **(agent or {})}}
    if agent == {}:
        settings.pop("agent")
    await initialize(client, folder, settings)
    uri = path.as_uri()
    text = path.read_text()
    open_doc(client, uri, text)
    diags = await diagnostics_for(client, uri, 1, timeout=60, predicate=lambda ds: any(d.code == "PLS001" for d in ds))
    return uri, text, script, diags


async def agent_action(client, uri, diags) -> dict:
    finding = next(d for d in diags if d.code == "PLS001")
    started = time.monotonic()
    found = await raw_request(client, lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), finding.range, lsp.CodeActionContext(diagnostics=[finding])))
    elapsed = time.monotonic() - started
    (action,) = [a for a in found if a["title"].startswith("Fix with agent")]
    assert elapsed < 2, f"the action list took {elapsed:.1f} s: it must not run the agent"
    return action


async def run(client, action: dict) -> dict:
    return await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command=action["command"]["command"], arguments=action["command"]["arguments"])), 180)


def as_dict(value):
    if hasattr(value, "_asdict"):
        return {k: as_dict(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [as_dict(v) for v in value]
    return value


@pytest.mark.pipeline
async def test_wrong_fix_fed_back_then_right_fix_applied_as_a_verified_versioned_edit(client, tmp_path):
    uri, text, _, diags = await open_broken(client, tmp_path, [WRONG, RIGHT], "Trust", [0, 1])
    action = await agent_action(client, uri, diags)
    assert action["title"] == "Fix with agent (scripted)" and action["kind"] == "quickfix"
    result = as_dict(await run(client, action))
    assert result["ok"] and result["applied"], result
    assert [a["verdict"] for a in result["attempts"]] == ["still failing", "verified"]
    assert "PLS001" in result["attempts"][0]["detail"]  # the checker's words, fed back to round 2
    assert result["tiers"] == [0, 1] and result["verdicts"]["add_kernel"]["1"] == "ok"  # proven by the lowering
    (edit,) = client.applied_edits
    (change,) = edit.edit.document_changes
    assert change.text_document.version == 1  # versioned: a client that moved on refuses it
    (text_edit,) = change.edits
    assert (text_edit.range.start.line, text_edit.range.end.line, text_edit.new_text) == (8, 9, "BLOCK_COLS = 128\n")
    shown = " | ".join(m.message for m in client.messages)
    assert "applied a verified fix (not compiled for the chip: tier 2 was not run" in shown and \
        "not verified: no reference()" in shown
    assert "the lane dim must be a multiple of 128" in shown and "2 call(s)" in shown
    from pallasite.knowledge.store import ResultsStore

    with ResultsStore.open(tmp_path / "ws") as store:  # every call recorded in the workspace's store
        assert [c.response for c in store.llm_calls(result["run_id"])] == [WRONG, RIGHT]
    stats = await raw_request(client, "pallasite/serverStats", None)
    assert stats["jaxImported"] is False  # the proposals ran in the worker, never in the server


async def test_garbage_and_a_deleted_pallas_call_are_never_applied(client, tmp_path):
    uri, text, script, diags = await open_broken(client, tmp_path, ["no idea, sorry"] * 3, "Not now", [0, 1])
    action = await agent_action(client, uri, diags)
    result = as_dict(await run(client, action))
    assert not result["ok"] and not result["applied"] and result["edits"] == []
    assert [a["verdict"] for a in result["attempts"]] == ["unreadable"] * 3
    script.write_text(json.dumps([DELETES_CALL]))
    result = as_dict(await run(client, action))
    assert not result["ok"] and result["attempts"][0]["verdict"] == "removed pallas_call"
    assert client.applied_edits == []
    shown = [m.message for m in client.messages if "no verified fix" in m.message]
    assert len(shown) == 2 and "Nothing was changed" in shown[0] and "tier 0 only" in shown[0]


async def test_without_a_provider_one_action_opens_the_settings_and_the_provider_docs(client, tmp_path):
    """Every action offered can run: with no provider there is no "Fix with agent (no LLM provider
    configured)" that only fails (there was, before), but one "Set up an LLM provider…", which opens
    docs/agents.md in the editor, says how in a message and names the settings for the client to open."""
    uri, _, _, diags = await open_broken(client, tmp_path, [], "Not now", [0], agent={})
    finding = next(d for d in diags if d.code == "PLS001")
    found = await raw_request(client, lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), finding.range, lsp.CodeActionContext(diagnostics=[finding])))
    titles = [a["title"] for a in found]
    assert not [t for t in titles if t.startswith("Fix with agent")], titles
    (action,) = [a for a in found if a["title"] == "Set up an LLM provider…"]
    assert action["kind"] == "quickfix" and action["command"]["command"] == "pallasite.setUpProvider"
    result = as_dict(await run(client, action))
    assert result["ok"] and result["settings"] == "pallasite.agent", result
    assert [d.uri for d in client.shown_documents] == [result["docs"]] and result["docs"].endswith("/docs/agents.md")
    said = [m.message for m in client.messages if "set up an LLM provider" in m.message]
    assert said and "agent.provider" in said[0] and "GEMINI_API_KEY" in said[0]
    assert client.applied_edits == []


async def test_without_a_provider_the_fix_command_still_says_how_to_configure_one(client, tmp_path):
    """The command itself (from a client that remembered it): refused with how to set a provider up."""
    uri, _, _, diags = await open_broken(client, tmp_path, [], "Not now", [0], agent={})
    result = as_dict(await run(client, {"command": {"command": "pallasite.fixWithAgent",
                                                    "arguments": [{"uri": uri, "version": 1, "line": 8}]}}))
    assert not result["ok"] and "agent.provider" in result["message"] and "GEMINI_API_KEY" in result["message"]
    assert client.applied_edits == []


async def test_the_fix_is_cancelled_from_its_progress(client, tmp_path):
    uri, _, _, diags = await open_broken(client, tmp_path, [{"text": RIGHT, "delay_s": 60}], "Not now", [0])
    action = await agent_action(client, uri, diags)
    pending = asyncio.ensure_future(run(client, action))
    for _ in range(200):
        if client.progress_reports:
            break
        await asyncio.sleep(0.05)
    token = next(iter(client.progress_reports))
    await asyncio.sleep(0.3)
    started = time.monotonic()
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(pending, 20)
    assert result == {"ok": False, "applied": False, "message": "cancelled; nothing was changed"}
    assert time.monotonic() - started < 5 and client.applied_edits == []
    assert type(client.progress_reports[token][-1]).__name__ == "WorkDoneProgressEnd"


async def test_an_edit_during_the_fix_means_nothing_is_applied(client, tmp_path):
    uri, text, _, diags = await open_broken(client, tmp_path, [{"text": RIGHT, "delay_s": 2}], "Not now", [0])
    action = await agent_action(client, uri, diags)
    pending = asyncio.ensure_future(run(client, action))
    await asyncio.sleep(0.5)
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text + "\n# a comment\n")]))
    result = as_dict(await asyncio.wait_for(pending, 60))
    assert result["ok"] and not result["applied"] and "document changed" in result["message"]
    assert client.applied_edits == []


async def test_a_fix_with_a_sleeper_is_shown_never_applied(client, tmp_path):
    """In the editor, "verified" delivered arbitrary code: a right change with one more line the user's
    next plain check would run. Verified means minimal now: the action applies nothing and says why."""
    sleeper = json.dumps({"explanation": "lane-aligned blocks", "edits": [
        {"search": "BLOCK_COLS = 100", "replace": "BLOCK_COLS = 128"},
        {"search": "    )(x, y)\n", "replace": "    )(x, y)\n\n\n__import__('shutil').rmtree('.', True)\n"}]})
    uri, text, _, diags = await open_broken(client, tmp_path, [sleeper], "Trust", [0, 1], {"maxRounds": 1})
    result = as_dict(await run(client, await agent_action(client, uri, diags)))
    assert not result["ok"] and not result["applied"] and client.applied_edits == []
    (attempt,) = result["attempts"]
    assert attempt["verdict"] == "not a minimal fix" and "calls __import__()" in attempt["detail"], attempt
    assert (tmp_path / "ws" / "add_bad_tiling.py").read_text() == text

"""Optimize through the language server: step mode (plan and diff documents opened by showDocument,
approve / revise / stop commands, the user's unsaved edits to a plan being the instruction), cancel
by $/cancelRequest and by the progress's cancel, the winner written beside the original or applied
as a versioned edit (never over text the user changed meanwhile), the hover on the kernel and the
inlay hints on the block sizes the winner changed. The scripted provider answers; times are the
cost model's estimates on CPU."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.uris import from_fs_path, to_fs_path

from test_lsp import answer_trust, change, client, diagnostics_for, initialize, open_doc, raw_request  # noqa: F401

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

DATA = Path(__file__).parent / "data" / "optimize"


def replies(*names: str) -> list[str]:
    out = []
    for name in names:
        out += [f"Try {name}\nbecause.", "```python\n" + (DATA / "candidates" / f"{name}.py").read_text() + "```"]
    return out


async def start(client, tmp_path, answers: list[str], agent: dict | None = None) -> tuple[Path, str, str]:
    """A trusted workspace with tests/data/optimize/add.py open and the scripted provider's answers."""
    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "add.py"
    shutil.copy(DATA / "add.py", path)
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(answers))
    uri, text = from_fs_path(str(path)), path.read_text()
    await initialize(client, folder, {"target": "v6e", "tiers": [0, 1], "check": {"onOpen": False},
                                      "agent": {"provider": "scripted", "scriptedFile": str(script), **(agent or {})}})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    return path, uri, text


async def next_shown(client, run, count: int) -> str:
    """The uri of the ``count``-th document the server asked the client to show."""
    for _ in range(2400):
        shown = [params.uri for params in client.shown_documents]
        if len(shown) >= count:
            return shown[count - 1]
        assert not run.done(), run.result()
        await asyncio.sleep(0.05)
    raise AssertionError(f"no document shown (shown: {client.shown_documents})")


async def decide(client, command: str, doc_uri: str):
    result = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command=command, arguments=[{"uri": doc_uri}]))
    assert result["ok"], result


async def jobs(client) -> list[dict]:
    return (await raw_request(client, "pallasite/serverStats", None))["jobs"]


async def hints(client, uri: str) -> list[lsp.InlayHint]:
    return await client.text_document_inlay_hint_async(lsp.InlayHintParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(100, 0)))) or []


async def test_step_mode_approve_revise_approve(client, tmp_path):
    path, uri, text = await start(client, tmp_path, replies("wrong_math", "big_blocks"))
    assert await hints(client, uri) == []  # no run known: no hints
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert {"Optimize", "Optimize step by step"} <= {lens.command.title for lens in lenses}
    run = asyncio.ensure_future(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "step", "iterations": 2}])))

    plan1 = await next_shown(client, run, 1)
    assert plan1.endswith("-1.md") and "/.pallasite/plans/" in plan1
    plan_lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(plan1)))
    assert [lens.command.command for lens in plan_lenses] == ["pallasite.optimize.approve", "pallasite.optimize.revise",
                                                              "pallasite.optimize.stop"]
    await decide(client, "pallasite.optimize.approve", plan1)
    diff1 = await next_shown(client, run, 2)
    assert diff1.endswith("-1.diff") and "-    o_ref[...] = x_ref[...] + y_ref[...]" in Path(to_fs_path(diff1)).read_text()
    await decide(client, "pallasite.optimize.approve", diff1)
    plan2 = await next_shown(client, run, 3)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(  # the editor opens it
        uri=plan2, language_id="markdown", version=1, text=Path(to_fs_path(plan2)).read_text())))
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(  # and the engineer rewrites it (unsaved)
        text_document=lsp.VersionedTextDocumentIdentifier(uri=plan2, version=2),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(
            text="Use 128-row blocks, keep the add\nEdited by the engineer.\n")]))
    await decide(client, "pallasite.optimize.revise", plan2)  # the edited file is the plan
    diff2 = await next_shown(client, run, 4)
    await decide(client, "pallasite.optimize.approve", diff2)
    result = await asyncio.wait_for(run, 300)
    assert [r["loop_word"] for r in result["table"]] == ["compiled, wrong", "valid"], result
    assert result["table"][1]["plan"] == "Use 128-row blocks, keep the add"
    assert result["method"] == "estimate (v6e)" and result["speedup"] > 1
    assert Path(result["written"]).read_text() == (DATA / "candidates" / "big_blocks.py").read_text()
    assert path.read_text() == text  # the original is untouched (winner: a new file beside it)
    line = next(i for i, s in enumerate(text.splitlines()) if "pl.pallas_call(" in s)
    column = text.splitlines()[line].index("pallas_call") + 2
    hover = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                    lsp.Position(line, column)))
    assert "vs the original file" in hover.contents.value and "estimate (v6e)" in hover.contents.value
    assert "| 2 * | compiled, correct |" in hover.contents.value
    assert "plan: Use 128-row blocks, keep the add" in hover.contents.value  # the plan summary
    # the revision reached the model: the implementer's request of iteration 2 carries the edited plan
    from pallasite.knowledge.store import ResultsStore

    store = ResultsStore.open(path.parent)
    try:
        calls = [c for c in store.llm_calls(result["run_id"]) if c.step == 2]
    finally:
        store.close()
    assert len(calls) == 2 and "Edited by the engineer." in calls[1].prompt and "Edited by" not in calls[0].prompt
    # the winner file was opened; the old plan documents lost their lenses (no run waits on them)
    assert client.shown_documents[-1].uri == from_fs_path(result["written"]) and result["written"].endswith("add.optimized.py")
    assert not await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(plan2)))
    # inlay hints: the block-size literal the winner changed (8 -> 128), with the estimate's provenance
    spec_line = next(i for i, s in enumerate(text.splitlines()) if "pl.BlockSpec((8," in s)
    (hint,) = await hints(client, uri)
    assert hint.label == " → 128 (optimized, estimate v6e)"
    assert (hint.position.line, hint.position.character) == (spec_line, text.splitlines()[spec_line].index("(8,") + 2)
    # an edit elsewhere keeps the hint (the literal is still there); an edit moving the literal drops it
    change(client, uri, 2, (len(text.splitlines()) - 1, 0), (len(text.splitlines()) - 1, 0), "# note\n")
    assert [h.label for h in await hints(client, uri)] == [" → 128 (optimized, estimate v6e)"]
    change(client, uri, 3, (0, 0), (0, 0), "# a line above moves every literal down\n")
    assert await hints(client, uri) == []


async def test_stop_lens_ends_the_run_cleanly(client, tmp_path):
    path, uri, text = await start(client, tmp_path, replies("big_blocks"))
    run = asyncio.ensure_future(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "step", "iterations": 2}])))
    plan1 = await next_shown(client, run, 1)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(plan1)))
    stop = next(lens.command for lens in lenses if lens.command.title == "Stop")
    result = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(stop.command, stop.arguments))
    assert result == {"ok": True}
    result = await asyncio.wait_for(run, 60)
    assert result["ok"] is False and "stopped by the user after the plan" in result["message"], result
    assert result["written"] is None and not (path.parent / "add.optimized.py").exists()
    assert [(j["kind"], j["state"]) for j in await jobs(client)] == [("optimize", "done")]
    # nothing waits any more, and the server keeps answering
    again = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(stop.command, stop.arguments))
    assert again["ok"] is False and "no optimize run is waiting" in again["message"]
    assert not await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(plan1)))
    assert await hints(client, uri) == []  # a run without a winner changes nothing
    bad = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "winner": "overwrite"}]))
    assert bad["ok"] is False and "winner newFile or edit" in bad["message"] and "'overwrite'" in bad["message"]


async def assert_cancelled(client, uri: str, plan1: str) -> None:
    for _ in range(200):  # the job ends (cancelled), none is left running
        states = [(j["kind"], j["state"]) for j in await jobs(client)]
        if states == [("optimize", "cancelled")]:
            break
        await asyncio.sleep(0.05)
    assert states == [("optimize", "cancelled")]
    assert not await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(plan1)))
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert "Optimize" in {lens.command.title for lens in lenses}  # the server keeps answering


async def test_cancel_request_ends_the_optimize_job(client, tmp_path):
    path, uri, text = await start(client, tmp_path, replies("big_blocks"))
    run = asyncio.ensure_future(client.protocol.send_request_async(lsp.WORKSPACE_EXECUTE_COMMAND, lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "step", "iterations": 2}]), msg_id="optimize-1"))
    plan1 = await next_shown(client, run, 1)
    client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="optimize-1"))
    try:
        answer = await asyncio.wait_for(run, 30)
    except Exception as exc:  # noqa: BLE001 - answered with the RequestCancelled error: fine too
        answer = {"ok": False, "message": str(exc)}
    assert answer["ok"] is False and "cancel" in str(answer["message"]).lower(), answer
    await assert_cancelled(client, uri, plan1)


async def test_progress_cancel_ends_the_optimize_job(client, tmp_path):
    path, uri, text = await start(client, tmp_path, replies("big_blocks"))
    run = asyncio.ensure_future(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "step", "iterations": 2}])))
    plan1 = await next_shown(client, run, 1)
    token = next(t for t, reports in client.progress_reports.items()
                 if reports and "optimizing add.py" in getattr(reports[0], "title", ""))
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    assert await asyncio.wait_for(run, 30) == {"ok": False, "message": "cancelled"}
    assert type(client.progress_reports[token][-1]).__name__ == "WorkDoneProgressEnd"
    await assert_cancelled(client, uri, plan1)


def record_edits(client, applied: bool = True) -> list[lsp.ApplyWorkspaceEditParams]:
    edits: list[lsp.ApplyWorkspaceEditParams] = []

    @client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply(params: lsp.ApplyWorkspaceEditParams):
        edits.append(params)
        return lsp.ApplyWorkspaceEditResult(applied=applied)

    return edits


async def test_winner_as_a_versioned_edit(client, tmp_path):
    edits = record_edits(client)
    path, uri, text = await start(client, tmp_path, replies("big_blocks"), {"optimizeWinner": "edit"})
    result = await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "auto", "iterations": 1}])), 120)
    assert result["applied"] is True and result["written"] is None, result
    (params,) = edits
    (doc_edit,) = params.edit.document_changes
    assert doc_edit.text_document.uri == uri and doc_edit.text_document.version == 1  # the version the run began with
    assert [e.new_text for e in doc_edit.edits] == [(DATA / "candidates" / "big_blocks.py").read_text()]
    assert not (path.parent / "add.optimized.py").exists() and path.read_text() == text


async def test_winner_edit_falls_back_to_a_new_file_when_the_document_changed(client, tmp_path):
    edits = record_edits(client)
    path, uri, text = await start(client, tmp_path, replies("big_blocks"), {"optimizeWinner": "edit"})
    run = asyncio.ensure_future(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "step", "iterations": 1}])))
    plan1 = await next_shown(client, run, 1)
    change(client, uri, 2, (0, 0), (0, 0), "# the engineer types while the run waits\n")  # the user's text
    await decide(client, "pallasite.optimize.approve", plan1)
    await decide(client, "pallasite.optimize.approve", await next_shown(client, run, 2))
    result = await asyncio.wait_for(run, 120)
    assert edits == [] and result["applied"] is False  # no edit over the user's text
    assert result["written"].endswith("add.optimized.py") and "changed during the run" in result["placement"], result
    assert Path(result["written"]).read_text() == (DATA / "candidates" / "big_blocks.py").read_text()
    assert client.shown_documents[-1].uri == from_fs_path(result["written"])
    state = await raw_request(client, "pallasite/documentState", {"uri": uri})
    assert state["version"] == 2 and state["text"].startswith("# the engineer types")


async def test_winner_edit_refused_by_the_editor_goes_to_a_new_file(client, tmp_path):
    edits = record_edits(client, applied=False)
    path, uri, text = await start(client, tmp_path, replies("big_blocks"), {"optimizeWinner": "edit"})
    result = await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "auto", "iterations": 1}])), 120)
    assert len(edits) == 1 and result["applied"] is False
    assert "the editor did not apply the edit" in result["placement"] and Path(result["written"]).is_file()


def test_each_phase_with_text_gets_its_step_document():
    from pallasite.server.editor.optimize_lsp import is_step_document, shown_document

    assert shown_document("r1", "plan", {"iteration": 2, "plan": "Use bigger blocks"}) == ("r1-2.md", "Use bigger blocks\n")
    assert shown_document("r1", "implement", {"iteration": 1, "diff": "--- a\n+++ b\n", "source": "x"}) == \
        ("r1-1.diff", "--- a\n+++ b\n")
    tests = "def reference(x, y):\n    return x + y\n"
    assert shown_document("r1", "tests", {"iteration": 0, "tests": tests}) == ("r1-tests.py", tests)
    assert shown_document("r1", "review", {"iteration": 3, "text": "look"}) == ("r1-3-review.txt", "look\n")
    assert shown_document("r1", "profile", {"iteration": 1, "time_s": 1e-6, "label": "estimate (v6e)"}) is None
    assert is_step_document("/w/.pallasite/plans/r1-tests.py") and not is_step_document("/w/kernels/r1-tests.py")


async def test_step_mode_reviews_the_test_writers_tests(client, tmp_path):
    """A file without reference and inputs: the test writer's validated tests open as
    ``<run>-tests.py``; Revise with the engineer's edited text freezes that text; Stop at the plan."""
    proposal = (DATA / "tests" / "axpy_right.py").read_text()
    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "no_tests.py"
    shutil.copy(DATA / "no_tests.py", path)
    script = tmp_path / "replies.json"
    script.write_text(json.dumps([f"Here are the tests.\n```python\n{proposal}```", "Try bigger blocks\nbecause."]))
    uri = from_fs_path(str(path))
    await initialize(client, folder, {"target": "v6e", "tiers": [0, 1], "check": {"onOpen": False},
                                      "agent": {"provider": "scripted", "scriptedFile": str(script)}})
    open_doc(client, uri, path.read_text())
    await diagnostics_for(client, uri, 1)
    run = asyncio.ensure_future(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "step", "iterations": 1}])))
    tests_doc = await next_shown(client, run, 1)
    assert tests_doc.endswith("-tests.py") and "/.pallasite/plans/" in tests_doc
    assert Path(to_fs_path(tests_doc)).read_text() == proposal
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(tests_doc)))
    assert [lens.command.title.split(" ")[0] for lens in lenses] == ["Approve", "Revise", "Stop"]
    edited = "# reviewed by the engineer\n" + proposal
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(
        uri=tests_doc, language_id="python", version=1, text=proposal)))
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=tests_doc, version=2),
        content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=edited)]))
    assert client.diagnostics.get(tests_doc) is None  # a step document is never checked as a kernel
    await decide(client, "pallasite.optimize.revise", tests_doc)
    plan = await next_shown(client, run, 2)
    assert plan.endswith("-1.md")
    await decide(client, "pallasite.optimize.stop", plan)
    result = await asyncio.wait_for(run, 120)
    assert "stopped by the user" in result["message"], result
    from pallasite.agents.optimize_record import load
    from pallasite.knowledge.store import ResultsStore

    store = ResultsStore.open(folder)
    try:
        state = load(store, result["run_id"])
    finally:
        store.close()
    assert state.context["tests"] == edited  # the engineer's text is what was frozen


@pytest.mark.parametrize("rounds, verdict", [(None, "valid"), (0, "not compiled")])
async def test_fix_rounds_setting_fixes_a_candidate_that_fails_to_compile(client, tmp_path, rounds, verdict):
    fix = {"explanation": "rows in multiples of 8", "edits": [
        {"search": "pl.BlockSpec((7, x.shape[1])", "replace": "pl.BlockSpec((16, x.shape[1])"},
        {"search": "grid=(x.shape[0] // 7,)", "replace": "grid=(x.shape[0] // 16,)"}]}
    agent = {} if rounds is None else {"optimizeFixRounds": rounds}  # None: the default (1 round)
    path, uri, text = await start(client, tmp_path, [*replies("bad_tiling"), json.dumps(fix)], agent)
    result = await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "auto", "iterations": 1}])), 120)
    assert [r["loop_word"] for r in result["table"]] == [verdict], result
    if verdict == "valid":
        assert "// 16" in Path(result["written"]).read_text()


async def test_winner_that_cannot_be_written_is_a_message_not_a_crash(tmp_path):
    from types import SimpleNamespace

    from pallasite.agents.optimize import Iteration, new_run
    from pallasite.analysis.verdict import COST_MODEL, Timing, Verdict
    from pallasite.server.editor.optimize_lsp import place_winner

    original = (DATA / "add.py").read_text()
    state = new_run(str(tmp_path / "missing-folder" / "add.py"), original)
    state.baseline = Timing(2e-6, "estimate", "v6e", COST_MODEL)
    state.iterations = [Iteration(1, source="# faster\n", verdict="valid",
                                  result=Verdict.of(True, True, Timing(1e-6, "estimate", "v6e", COST_MODEL), judged_by="the judge"))]
    shown: list[str] = []

    async def show(params):
        shown.append(params.uri)

    ls = SimpleNamespace(session=SimpleNamespace(documents={}, log=print), window_show_document_async=show)
    placed = await place_winner(ls, "file:///x/add.py", state, 1, "edit", apply_edit=None)
    assert placed["written"] is None and placed["applied"] is False and shown == []
    assert "cannot write" in placed["placement"] and "the document was closed during the run" in placed["placement"]
    assert state.run_id in placed["placement"]


@pytest.mark.parametrize("tests_file", ["axpy_right", "axpy_wrong"])
async def test_the_editors_optimize_uses_the_reviewed_tests_file(client, tmp_path, tests_file):
    """Issue 23: the editor runs the same service as the CLI, so a reviewed ``<stem>.tests.py`` is the
    run's tests: validated against the original first (wrong tests stop the run and say so), and
    frozen (the test writer is never asked)."""
    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "no_tests.py"
    shutil.copy(DATA / "no_tests.py", path)
    shutil.copy(DATA / "tests" / f"{tests_file}.py", folder / "no_tests.tests.py")
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["Try bigger blocks\nbecause.", "no code in this reply"]))
    uri = from_fs_path(str(path))
    await initialize(client, folder, {"target": "v6e", "tiers": [0, 1], "check": {"onOpen": False},
                                      "agent": {"provider": "scripted", "scriptedFile": str(script)}})
    open_doc(client, uri, path.read_text())
    await diagnostics_for(client, uri, 1)
    result = await asyncio.wait_for(client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="pallasite.optimize", arguments=[{"uri": uri, "mode": "auto", "iterations": 1}])), 240)
    if tests_file == "axpy_wrong":
        assert result["ok"] is False and "the original kernel does not pass these tests" in result["message"], result
        assert "no_tests.tests.py" in result["message"]
        return
    assert [r["loop_word"] for r in result["table"]] == ["no candidate"], result  # the planner, not the test writer
    from pallasite.agents.optimize_record import load
    from pallasite.knowledge.store import ResultsStore

    store = ResultsStore.open(folder)
    try:
        state = load(store, result["run_id"])
    finally:
        store.close()
    assert state.context["tests"] == (DATA / "tests" / "axpy_right.py").read_text()
    assert "no_tests.tests.py" in state.context["tests_summary"]

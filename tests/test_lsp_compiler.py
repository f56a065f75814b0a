"""The language server with the compiler tiers (a real check worker): trust, checks on open/save,
compiler findings carried through edits, the check command's progress and cancellation, and a
worker killed mid-check. Tier 1 (the Pallas lowering on CPU jaxlib) keeps these fast; tier 2 has
one test marked ``tpu_compiler``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json

import psutil
import pytest
from lsprotocol import types as lsp

from test_lsp import (  # noqa: F401  (client is a fixture)
    answer_trust, change, client, codes_at, copy_fixture, diagnostics_for, initialize, open_doc, raw_request,
)


def has(code: str, tier: int | None = None):
    return lambda diags: any(d.code == code and (tier is None or d.data["tier"] == tier) for d in diags)


async def trusted_open(client, tmp_path, name: str, options: dict | None = None):
    answer_trust(client, "Trust")
    path, uri, text = copy_fixture(name, tmp_path / "ws")
    await initialize(client, tmp_path / "ws", {"tiers": [0, 1], **(options or {})})
    open_doc(client, uri, text)
    return path, uri, text


async def test_trusting_a_folder_runs_the_lowering_and_shows_its_finding(client, tmp_path):
    _, uri, text = await trusted_open(client, tmp_path, "store_shape.py")
    diags = await diagnostics_for(client, uri, 1, timeout=120, predicate=has("PLS104", 1))
    finding = next(d for d in diags if d.code == "PLS104")
    assert finding.range.start.line == 10  # `o_ref[...] = x[:, :64]`
    assert finding.data["chip"] == "v6e" and "jax lowering" in finding.source
    assert len(client.trust_answers) == 1
    store = tmp_path / "home" / "xdg_config_home" / "pallasite" / "trusted-folders.json"
    assert str((tmp_path / "ws").resolve()) in json.loads(store.read_text())["trusted"]
    assert any(s["trusted"] for s in client.statuses)
    assert any(s["worker"] in ("starting", "checking") for s in client.statuses)
    assert client.statuses[-1]["worker"] == "idle"
    # the kernel hover now knows the result, and says where it came from
    hover = await client.text_document_hover_async(lsp.HoverParams(
        lsp.TextDocumentIdentifier(uri), lsp.Position(7, 6)))
    assert "| 1 | v6e | error | last check in this session" in hover.contents.value


async def test_compiler_finding_moves_with_an_edit_above_and_goes_when_its_range_is_edited(client, tmp_path):
    _, uri, text = await trusted_open(client, tmp_path, "store_shape.py")
    await diagnostics_for(client, uri, 1, timeout=120, predicate=has("PLS104", 1))
    change(client, uri, 2, (3, 0), (3, 0), "import functools\n")  # a new line above the kernel
    diags = await diagnostics_for(client, uri, 2)
    assert codes_at(diags, "PLS104") == [11]  # moved down with its text, without re-checking
    line = text.splitlines()[10]
    change(client, uri, 3, (11, 4), (11, len(line)), "o_ref[...] = x")  # rewrite the marked store
    diags = await diagnostics_for(client, uri, 3)
    assert codes_at(diags, "PLS104") == []


async def test_check_command_reports_progress_and_result(client, tmp_path):
    _, uri, _ = await trusted_open(client, tmp_path, "store_shape.py", {"check": {"onOpen": False}})
    await diagnostics_for(client, uri, 1)
    result = await asyncio.wait_for(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.check", arguments=[{"uri": uri, "tiers": [0, 1]}])), 120)
    assert result["ok"] is True and result["chip"] == "v6e"
    kinds = [[type(v).__name__ for v in values] for values in client.progress_reports.values()]
    assert ["WorkDoneProgressBegin", "WorkDoneProgressEnd"] == [kinds[-1][0], kinds[-1][-1]]
    assert codes_at(client.diagnostics[uri], "PLS104") == [10]


async def test_check_command_is_cancelled_from_the_progress(client, tmp_path):
    _, uri, _ = await trusted_open(client, tmp_path, "slow_import.py", {"check": {"onOpen": False}})
    await diagnostics_for(client, uri, 1)
    pending = asyncio.ensure_future(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.check", arguments=[{"uri": uri}])))
    for _ in range(200):
        if client.progress_reports:
            break
        await asyncio.sleep(0.05)
    token = next(iter(client.progress_reports))
    await asyncio.sleep(0.5)
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(pending, 20)
    assert result == {"ok": False, "message": "cancelled"}
    assert type(client.progress_reports[token][-1]).__name__ == "WorkDoneProgressEnd"


@pytest.mark.pipeline
async def test_worker_killed_mid_check_is_reported_and_next_save_works(client, tmp_path):
    path, uri, text = await trusted_open(client, tmp_path, "slow_import.py")
    stats = await raw_request(client, "pallasite/serverStats", None)
    server = psutil.Process(stats["pid"])
    worker = None
    for _ in range(600):  # the check on open starts a worker and imports the file (sleeping 30 s)
        children = server.children(recursive=True)
        if children:
            worker = children[-1]
            break
        await asyncio.sleep(0.05)
    assert worker is not None
    for _ in range(600):  # kill it while it imports the file (after its own start-up)
        if any(s["worker"] == "checking" for s in client.statuses):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    worker.kill()
    diags = await diagnostics_for(client, uri, 1, timeout=60, predicate=has("PLS902"))
    assert codes_at(diags, "PLS902")
    for _ in range(100):
        if any("PLS902" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.05)
    assert any("PLS902" in m.message and m.type == lsp.MessageType.Error for m in client.messages)
    assert any(s["worker"] == "crashed" for s in client.statuses)
    # remove the sleep, save: the restarted worker checks the file
    lines = text.splitlines()
    line = lines.index("time.sleep(30)")
    change(client, uri, 2, (line, 0), (line, len("time.sleep(30)")), "pass")
    path.write_text(text.replace("time.sleep(30)", "pass"))
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    diags = await diagnostics_for(client, uri, 2, timeout=120, predicate=has("PLS104", 1))
    assert not codes_at(diags, "PLS902")
    assert client.statuses[-1]["worker"] == "idle"


@pytest.mark.tpu_compiler
async def test_tier2_compiler_verdict_on_save(client, tmp_path):
    if importlib.util.find_spec("libtpu") is None:
        pytest.skip("libtpu is not installed (pip install 'pallasite[tpu]')")
    _, uri, _ = await trusted_open(client, tmp_path, "store_shape.py", {"tiers": [0, 2], "target": "v5e"})
    at_store = lambda diags: [d for d in diags if d.data["tier"] == 2 and d.range.start.line == 10]  # noqa: E731
    diags = await diagnostics_for(client, uri, 1, timeout=240, predicate=at_store)
    assert at_store(diags)[0].data["chip"] == "v5e" and at_store(diags)[0].severity == lsp.DiagnosticSeverity.Error


@pytest.mark.pipeline
async def test_select_target_rechecks_for_the_new_chip(client, tmp_path):
    _, uri, _ = await trusted_open(client, tmp_path, "store_shape.py")
    await diagnostics_for(client, uri, 1, timeout=120, predicate=has("PLS104", 1))
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.selectTarget", arguments=["v5p"]))
    assert result == {"ok": True, "target": "v5p"}
    on_v5p = lambda diags: any(d.code == "PLS104" and d.data["chip"] == "v5p" for d in diags)  # noqa: E731
    diags = await diagnostics_for(client, uri, 1, timeout=120, predicate=on_v5p)
    assert [d.data["chip"] for d in diags if d.code == "PLS104"] == ["v5p"]


@pytest.mark.pipeline
async def test_trust_folder_command_checks_open_files(client, tmp_path):
    answer_trust(client, "Not now")
    folder = tmp_path / "ws"
    _, uri, text = copy_fixture("store_shape.py", folder)
    await initialize(client, folder, {"tiers": [0, 1]})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    await asyncio.sleep(0.5)
    assert not any(d.data["tier"] == 1 for p in client.published for d in p.diagnostics)
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.trustFolder", arguments=[str(folder)]))
    assert result["ok"] is True
    await diagnostics_for(client, uri, 1, timeout=120, predicate=has("PLS104", 1))
    assert client.statuses[-1]["trusted"] is True


@pytest.mark.pipeline
async def test_kernel_hover_reads_the_results_store_of_an_earlier_session(tmp_path):
    from test_lsp import start_client, stop_client

    first = await start_client(tmp_path / "home")
    try:
        _, uri, text = await trusted_open(first, tmp_path, "store_shape.py")
        await diagnostics_for(first, uri, 1, timeout=120, predicate=has("PLS104", 1))
        # the kernel hover says the file's compile verdict in check's words (issue 33)
        shown = await first.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                       lsp.Position(7, 6)))
        assert "The file at the last check: **not compiled for v6e: 1 error(s): PLS104" in shown.contents.value
    finally:
        await stop_client(first)
    assert (tmp_path / "ws" / ".pallasite").is_dir()
    second = await start_client(tmp_path / "home2")  # a fresh server, which trusts nothing
    try:
        answer_trust(second, "Not now")
        await initialize(second, tmp_path / "ws", {"tiers": [0, 1]})
        open_doc(second, uri, text)
        await diagnostics_for(second, uri, 1)
        result = await second.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(7, 6)))
        assert "| 1 | v6e | error (PLS104) | results store (.pallasite)" in result.contents.value
        assert not any(d.data["tier"] == 1 for p in second.published for d in p.diagnostics)
    finally:
        await stop_client(second)


@pytest.mark.pipeline
async def test_edits_do_not_cancel_a_running_check_but_a_newer_save_supersedes_it(client, tmp_path):
    path, uri, text = await trusted_open(client, tmp_path, "slow_import.py")
    stats = await raw_request(client, "pallasite/serverStats", None)
    server = psutil.Process(stats["pid"])
    for _ in range(600):  # the check on open is importing the file (30 s sleep)
        if server.children(recursive=True):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    lines = text.splitlines()
    line = lines.index("time.sleep(30)")
    change(client, uri, 2, (line, 0), (line, len("time.sleep(30)")), "pass")  # typing: no save
    await diagnostics_for(client, uri, 2)
    await asyncio.sleep(0.5)
    assert client.statuses[-1]["worker"] in ("starting", "checking")  # the check still runs
    path.write_text(text.replace("time.sleep(30)", "pass"))
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    # the newer save replaced the 30 s check: its verdict arrives well before the old one could
    diags = await diagnostics_for(client, uri, 2, timeout=25, predicate=has("PLS104", 1))
    assert codes_at(diags, "PLS104") == [12]


async def test_check_command_runs_tier3_when_asked(client, tmp_path):
    _, uri, _ = await trusted_open(client, tmp_path, "add_ok.py", {"check": {"onOpen": False}})
    await diagnostics_for(client, uri, 1)
    result = await asyncio.wait_for(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.check", arguments=[{"uri": uri, "tiers": [0, 1, 3]}])), 180)
    assert result["ok"] is True and result["findings"] == 0
    assert any("interpret mode (not TPU time)" in note for note in result["notes"])
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert lenses[0].command.title == "Check for v6e (last: tier 1 ok, tier 3 ok)"


@pytest.mark.pipeline
async def test_a_hanging_check_hits_the_time_limit_and_is_reported(client, tmp_path):
    _, uri, _ = await trusted_open(client, tmp_path, "slow_import.py", {"check": {"timeLimitS": 3}})
    diags = await diagnostics_for(client, uri, 1, timeout=60, predicate=has("PLS903"))
    assert codes_at(diags, "PLS903")
    for _ in range(100):
        if any("PLS903" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.05)
    assert any("PLS903" in m.message and "restarts" in m.message for m in client.messages)


async def test_a_mistake_seen_by_tier0_and_the_lowering_is_shown_once(client, tmp_path):
    _, uri, _ = await trusted_open(client, tmp_path, "tiling_agree.py")
    agrees = lambda diags: any("agrees" in r.message for d in diags for r in d.related_information or ())  # noqa: E731
    diags = await diagnostics_for(client, uri, 1, timeout=120, predicate=agrees)
    at_spec = [d for d in diags if d.range.start.line == 7]  # BLOCK_COLS = 100: where the value was set
    assert [d.code for d in at_spec] == ["PLS001"]
    assert any("jax lowering (v6e) agrees with PLS001 (as PLS101)" in r.message for r in at_spec[0].related_information)
    assert not [d for d in diags if d.code == "PLS101"]


async def test_check_command_in_script_mode_runs_main_and_reports_its_kernels(client, tmp_path):
    _, uri, _ = await trusted_open(client, tmp_path, "script_cumsum.py", {"check": {"onOpen": False}})
    await diagnostics_for(client, uri, 1)
    plain = await asyncio.wait_for(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.check", arguments=[{"uri": uri}])), 120)
    # no example inputs, but __main__ shows the shapes: the plain check reads them (zero configuration)
    assert plain["ok"] is True and not codes_at(client.diagnostics[uri], "PLS900")
    assert [d.range.start.line for d in client.diagnostics[uri] if d.data.get("tier") == 1] == [12]
    result = await asyncio.wait_for(client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.check", arguments=[{"uri": uri, "script": True}])), 120)
    assert result["ok"] is True and result["script"] is True
    diags = client.diagnostics[uri]
    assert not codes_at(diags, "PLS900")
    tier1 = [d for d in diags if d.data.get("tier") == 1]
    assert [d.range.start.line for d in tier1] == [12]  # the jnp.cumsum line, found by running __main__
    begins = [v[0] for v in client.progress_reports.values() if v and type(v[0]).__name__ == "WorkDoneProgressBegin"]
    assert any("script mode" in b.title for b in begins)
    bad = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.check", arguments=[{"uri": uri, "script": "yes"}]))
    assert bad["ok"] is False and "script must be true or false" in bad["message"]


@pytest.mark.tpu_compiler
async def test_after_a_check_the_hover_shows_the_scoped_vmem_limit_from_the_warm_worker(client, tmp_path):
    if importlib.util.find_spec("libtpu") is None:
        pytest.skip("libtpu is not installed: the scoped-VMEM limit is measured with it")
    _, uri, text = await trusted_open(client, tmp_path, "store_shape.py")
    call_line = next(i for i, line in enumerate(text.splitlines()) if "pl.pallas_call(" in line)

    async def call_hover() -> str:
        hover = await client.text_document_hover_async(lsp.HoverParams(
            lsp.TextDocumentIdentifier(uri), lsp.Position(call_line, 15)))
        return hover.contents.value

    assert "scoped VMEM limit for v6e not known" in await call_hover()  # a fresh install: no chip table yet
    await diagnostics_for(client, uri, 1, timeout=120, predicate=has("PLS104", 1))
    for _ in range(600):  # the worker probes libtpu in the background after the check
        value = await call_hover()
        if "scoped VMEM on v6e" in value:
            break
        await asyncio.sleep(0.1)
    assert "scoped VMEM on v6e" in value and "limit from the chip table cache (libtpu" in value
    cache = tmp_path / "home" / "xdg_cache_home" / "pallasite"
    assert [p.name for p in cache.glob("chips-*.json")]  # written for the next session and `pallasite chips`


@pytest.mark.pipeline
async def test_a_check_result_arriving_after_typing_lands_on_the_moved_lines(client, tmp_path):
    _, uri, text = await trusted_open(client, tmp_path, "slow_two_stores.py")
    lines = text.splitlines()
    kernel = lines.index("def half_kernel(x_ref, o_ref):")
    half_store, quarter_store = (lines.index(f"    o_ref[...] = x_ref[...][:, {s}]") for s in (":64", "32:96"))
    for _ in range(600):  # the check on open is running (the file's import sleeps 5 s)
        if any(s["worker"] == "checking" for s in client.statuses):
            break
        await asyncio.sleep(0.05)
    assert client.statuses[-1]["worker"] == "checking"
    change(client, uri, 2, (kernel, 0), (kernel, 0), "ROWS = 128\n")  # a new line above both kernels
    quarter_now = quarter_store + 1
    change(client, uri, 3, (quarter_now, 4), (quarter_now, len(lines[quarter_store])), "o_ref[...] = x_ref[...]")
    await diagnostics_for(client, uri, 3)
    assert client.statuses[-1]["worker"] == "checking"  # both edits were made before the verdict came
    diags = await diagnostics_for(client, uri, 3, timeout=120, predicate=has("PLS104", 1))
    # computed for version 1, shown at version 3: the first store's finding moved down one line;
    # the second store was rewritten, so its finding no longer applies and is dropped
    assert codes_at(diags, "PLS104") == [half_store + 1]


async def test_a_save_of_the_text_being_checked_does_not_restart_the_check(client, tmp_path):
    path, uri, text = await trusted_open(client, tmp_path, "slow_import.py")
    for _ in range(600):  # the check on open is importing the file (30 s sleep)
        if any(s["worker"] == "checking" for s in client.statuses):
            break
        await asyncio.sleep(0.05)
    started = (await raw_request(client, "pallasite/serverStats", None))["checksStarted"]
    assert started == 1
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))  # unchanged
    await asyncio.sleep(0.5)
    stats = await raw_request(client, "pallasite/serverStats", None)
    assert stats["checksStarted"] == 1 and stats["status"]["worker"] == "checking"  # the same check goes on
    # a save of a different text still supersedes it
    lines = text.splitlines()
    line = lines.index("time.sleep(30)")
    change(client, uri, 2, (line, 0), (line, len("time.sleep(30)")), "pass")
    path.write_text(text.replace("time.sleep(30)", "pass"))
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    diags = await diagnostics_for(client, uri, 2, timeout=25, predicate=has("PLS104", 1))
    assert codes_at(diags, "PLS104") == [12]
    assert (await raw_request(client, "pallasite/serverStats", None))["checksStarted"] == 2


def _is_worker(process: psutil.Process) -> bool:
    try:
        return "pallasite.runner.worker" in " ".join(process.cmdline())
    except psutil.Error:
        return False


@pytest.mark.pipeline
async def test_worker_killed_during_its_start_up_is_shown_as_a_crash(client, tmp_path):
    path, uri, text = await trusted_open(client, tmp_path, "store_shape.py", {"check": {"onOpen": False}})
    await diagnostics_for(client, uri, 1)
    stats = await raw_request(client, "pallasite/serverStats", None)
    server = psutil.Process(stats["pid"])
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    worker = None
    for _ in range(2000):  # kill the worker as soon as it exists: before its handshake (jax import)
        # the worker process itself (under the sandbox it sits below `unshare` and the namespace's init)
        workers = [p for p in server.children(recursive=True) if _is_worker(p)]
        if workers:
            worker = workers[0]
            break
        await asyncio.sleep(0.005)
    assert worker is not None
    worker.kill()
    diags = await diagnostics_for(client, uri, 1, timeout=60, predicate=has("PLS906"))
    assert codes_at(diags, "PLS906") == [0]
    for _ in range(100):
        if any("PLS906" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.05)
    [shown] = [m for m in client.messages if "PLS906" in m.message]
    assert shown.type == lsp.MessageType.Error and "could not start" in shown.message
    assert client.statuses[-1]["worker"] == "crashed"
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    diags = await diagnostics_for(client, uri, 1, timeout=120, predicate=has("PLS104", 1))
    assert not codes_at(diags, "PLS906") and client.statuses[-1]["worker"] == "idle"


@pytest.mark.pipeline
async def test_a_tier3_failure_is_published_then_located_in_the_background_with_a_verified_fix(client, tmp_path):
    """Issue 57: the check's tier-3 finding (the NaN tail of a grid missing ``pl.cdiv``) is published as the
    check found it; the locate step runs after it, in the background, and moves it to the grid's ``//``
    with the verified edit as a quick fix."""
    import shutil
    from pathlib import Path

    from pygls.uris import from_fs_path

    answer_trust(client, "Trust")
    folder = tmp_path / "ws"
    folder.mkdir()
    path = folder / "grid_no_cdiv.py"
    shutil.copy(Path(__file__).parent / "data" / "locate" / "grid_no_cdiv.py", path)
    uri, text = from_fs_path(str(path)), path.read_text()
    await initialize(client, folder, {"tiers": [0, 3], "check": {"locateBudgetS": 120}})
    open_doc(client, uri, text)
    located = lambda ds: any(d.code == "PLS303" and d.range.start.line == 22 for d in ds)  # noqa: E731
    diags = await diagnostics_for(client, uri, 1, timeout=280, predicate=located)
    first = next(i for i, p in enumerate(client.published) if p.uri == uri and has("PLS303", 3)(p.diagnostics))
    assert not located(client.published[first].diagnostics)  # the check's own finding came out first, unmoved
    finding = next(d for d in diags if d.code == "PLS303")
    assert (finding.range.start.character, finding.range.end.character) == (14, 23)  # `n // ROWS`
    actions = await raw_request(client, lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), finding.range, lsp.CodeActionContext(diagnostics=[finding])))
    (verified,) = [a for a in actions if a["title"].startswith("verified: with this change the kernel matches")]
    (change_,) = verified["edit"]["documentChanges"]
    (edit,) = change_["edits"]
    assert change_["textDocument"]["uri"] == uri and edit["newText"] == "pl.cdiv(n, ROWS)" and edit["range"]["start"] == {"line": 22, "character": 14}

"""The language server end to end over stdio (pytest-lsp): tier 0, hover, lenses, actions, settings.

Each test starts `python -m pallasite.server.cli serve` with its own config/cache folders, opens
fixture kernels from tests/data/lsp/ and checks what a client receives. Compiler-tier behaviour
(trusted folders, shifting compiler findings, worker crashes) is in test_lsp_compiler.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pygls.uris import from_fs_path
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

DATA = Path(__file__).parent / "data" / "lsp"


def server_env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        env[var] = str(home / var.lower())
    env["HOME"] = str(home)
    return env


def _record_publish(ls, params: lsp.PublishDiagnosticsParams):
    ls.diagnostics[params.uri] = params.diagnostics
    ls.published.append(params)
    ls.published_at = getattr(ls, "published_at", [])
    ls.published_at.append(time.monotonic())


def _record_status(ls, params):
    ls.statuses.append(params._asdict() if hasattr(params, "_asdict") else dict(params))


def _record_lens_refresh(ls, params):
    """workspace/codeLens/refresh: the server asks for the lenses again (a result arrived)."""
    ls.lens_refreshes.append(time.monotonic())


def _answer_trust(ls, params: lsp.ShowMessageRequestParams):
    ls.trust_answers.append(params.message)
    return lsp.MessageActionItem(title=ls.trust_answer) if ls.trust_answer else None


def make_client() -> LanguageClient:
    """pytest-lsp's client, also recording every publication, status and trust question."""
    lsp_client = LanguageClient(converter_factory=default_converter)
    register_lsp_features(lsp_client, {
        **DEFAULT_CLIENT_FEATURES,
        lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _record_publish,
        lsp.WINDOW_SHOW_MESSAGE_REQUEST: _answer_trust,
        "pallasite/status": _record_status,
        lsp.WORKSPACE_CODE_LENS_REFRESH: _record_lens_refresh,
    })
    lsp_client.published, lsp_client.statuses, lsp_client.trust_answers = [], [], []
    lsp_client.lens_refreshes = []
    lsp_client.trust_answer = "Not now"
    return lsp_client


async def start_client(home: Path) -> LanguageClient:
    config = ClientServerConfig(server_command=[sys.executable, "-m", "pallasite.server.cli", "serve"],
                                server_env=server_env(home), client_factory=make_client)
    return await config.start()


async def stop_client(lsp_client: LanguageClient) -> None:
    try:
        await asyncio.wait_for(lsp_client.shutdown_session(), 20)
    finally:
        server = lsp_client._server  # a test that failed before initialize: nothing ends the server but this
        if server is not None and server.returncode is None:
            server.kill()
        await lsp_client.stop()


@pytest_asyncio.fixture
async def client(tmp_path):
    lsp_client = await start_client(tmp_path / "home")
    yield lsp_client
    await stop_client(lsp_client)


def answer_trust(client, answer: str | None) -> None:
    """Make the client answer the trust question with ``answer`` (None: dismiss it)."""
    client.trust_answer = answer


async def initialize(client, folder: Path, options: dict | None = None, encoding: str | None = None) -> None:
    caps = client_capabilities("visual-studio-code")
    if encoding:
        caps.general = lsp.GeneralClientCapabilities(position_encodings=[encoding])
    await client.initialize_session(lsp.InitializeParams(
        capabilities=caps,
        root_uri=from_fs_path(str(folder)),
        workspace_folders=[lsp.WorkspaceFolder(uri=from_fs_path(str(folder)), name="ws")],
        initialization_options={"pallasite": options or {}},
    ))


def copy_fixture(name: str, folder: Path) -> tuple[Path, str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    shutil.copy(DATA / name, path)
    return path, from_fs_path(str(path)), path.read_text()


def open_doc(client, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(
        text_document=lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)))


def change(client, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str) -> None:
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(
        text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[lsp.TextDocumentContentChangePartial(
            range=lsp.Range(lsp.Position(*start), lsp.Position(*end)), text=text)]))


async def diagnostics_for(client, uri: str, version: int | None = None, timeout: float = 10.0,
                          predicate=None) -> list[lsp.Diagnostic]:
    """Wait for a publishDiagnostics for ``uri`` (at ``version``, and matching ``predicate``)."""
    records = client.published

    async def wait():
        while True:
            for params in records:
                if params.uri == uri and (version is None or params.version == version) and (
                        predicate is None or predicate(params.diagnostics)):
                    return list(params.diagnostics)
            await asyncio.sleep(0.02)

    return await asyncio.wait_for(wait(), timeout)


def plain(value):
    """pygls' generic result objects (namedtuples) as plain dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


async def raw_request(client, method: str, params):
    """A request whose result is read as plain JSON (lsprotocol's client-side hook reads any
    CodeAction carrying a command as a Command, losing its kind)."""
    real = client.protocol.get_result_type
    client.protocol.get_result_type = lambda m: None if m == method else real(m)
    try:
        return plain(await client.protocol.send_request_async(method, params))
    finally:
        client.protocol.get_result_type = real


def codes_at(diags, code: str) -> list[int]:
    return [d.range.start.line for d in diags if d.code == code]


# --------------------------------------------------------------------------- tier 0 while typing


async def test_broken_kernel_error_at_line_then_fix_clears_it(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("tiling_broken.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws")
    open_doc(client, uri, text)
    diags = await diagnostics_for(client, uri, 1)
    assert codes_at(diags, "PLS001") == [16]  # 0-based: the `bad = pl.BlockSpec(...)` line
    pls001 = next(d for d in diags if d.code == "PLS001")
    assert pls001.severity == lsp.DiagnosticSeverity.Error
    assert pls001.data["code"] == "PLS001" and pls001.data["version"] == 1
    assert "Hint:" in pls001.message  # the registry hint travels with the diagnostic
    related = {r.message for r in pls001.related_information or []}
    assert any("pallas_call" in m for m in related) and any("add_kernel" in m for m in related)
    # fix the text: 100 -> 128 on that line
    line = text.splitlines()[16]
    col = line.index("100")
    change(client, uri, 2, (16, col), (16, col + 3), "128")
    diags = await diagnostics_for(client, uri, 2)
    assert codes_at(diags, "PLS001") == []


async def test_server_never_imports_jax_and_is_silent_on_plain_python(client, tmp_path):
    _, uri, text = copy_fixture("plain_jax.py", tmp_path / "ws")
    _, kuri, ktext = copy_fixture("tiling_broken.py", tmp_path / "ws")
    answer_trust(client, "Not now")
    await initialize(client, tmp_path / "ws")
    open_doc(client, uri, text)
    open_doc(client, kuri, ktext)
    await diagnostics_for(client, kuri, 1)  # the kernel file got its diagnostics...
    assert all(p.uri != uri for p in client.published)  # ...the plain file got none
    position = lsp.Position(5, 8)
    assert await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), position)) is None
    assert await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri))) in ([], (), None)
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(position, position), lsp.CodeActionContext(diagnostics=[])))
    assert not actions
    stats = await raw_request(client, "pallasite/serverStats", None)
    assert stats["jaxImported"] is False


async def test_fifty_rapid_edits_publish_once_for_the_last_version(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("tiling_broken.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws")
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    before = len(client.published)
    for n in range(50):  # type a comment on the last line, 50 keystrokes within a second
        last = len(text.splitlines())
        change(client, uri, n + 2, (last, n), (last, n), "#" if n == 0 else "x")
        await asyncio.sleep(0.015)
    diags = await diagnostics_for(client, uri, 51)
    await asyncio.sleep(0.5)  # anything late would arrive now
    after = client.published[before:]
    assert [p.version for p in after] == [51]
    assert codes_at(diags, "PLS001") == [16]


async def test_untrusted_folder_gets_tier0_only_and_is_asked_once(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("tiling_broken.py", tmp_path / "ws")
    _, uri2, text2 = copy_fixture("renamed_api.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws", {"tiers": [0, 1]})
    open_doc(client, uri, text)
    open_doc(client, uri2, text2)
    await diagnostics_for(client, uri, 1)
    await diagnostics_for(client, uri2, 1)
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    await asyncio.sleep(1.0)
    assert len(client.trust_answers) == 1
    assert "Trust this folder to run its kernels in a pallasite worker?" in client.trust_answers[0]
    assert all(d.data["tier"] == 0 for p in client.published for d in p.diagnostics)
    assert client.statuses and client.statuses[-1]["trusted"] is False
    assert client.statuses[-1]["worker"] == "idle"
    assert not (tmp_path / "home" / "xdg_config_home" / "pallasite" / "trusted-folders.json").exists()


# --------------------------------------------------------------------------- hover, lenses, actions


async def test_hover_on_blockspec_call_and_grid(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("tiling_broken.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws", {"target": "v5e"})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    lines = text.splitlines()

    async def hover(line: int, needle: str) -> str:
        pos = lsp.Position(line, lines[line].index(needle) + 1)
        result = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri), pos))
        assert result is not None, f"no hover at {line}:{needle}"
        return result.contents.value

    spec = await hover(16, "pl.BlockSpec")
    assert "(256, 100)" in spec and "100.0 KiB as float32" in spec  # 256*100*4 bytes, dtype from example_inputs
    assert "not a multiple of 128" in spec
    call = await hover(17, "pallas_call")
    assert "float32 (from example_inputs())" in call
    # in[0] and out[0] 256x128 f32 (128 KiB each) + in[1] 256x100 (100 KiB), double-buffered
    assert "712.0 KiB" in call and "v5e" in call
    assert "scoped VMEM limit for v5e not known" in call  # no chip table cached in this HOME
    grid = await hover(19, "grid")
    # the grid is not static in the source; at example_inputs' (1024, 512) arrays it is (4, 4)
    assert grid.startswith("**grid**") and "(4, 4) = 16 steps at the example inputs' shapes" in grid
    kernel = await hover(9, "add_kernel")
    assert "No compile results yet" in kernel


async def test_code_lens_and_check_source_action(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("tiling_broken.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws", {"target": "v5p"})
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert [(lens.range.start.line, lens.command.title, lens.command.command) for lens in lenses] == [
        (17, "Check for v5p", "pallasite.check"),  # the file states a task: it can be timed and profiled too
        (17, "Time on local", "pallasite.time"), (17, "Profile on local", "pallasite.profile"),
        (17, "Autotune for v5p", "pallasite.autotune"),  # BLOCK_ROWS, a module constant in a block shape
        (17, "Optimize", "pallasite.optimize"), (17, "Optimize step by step", "pallasite.optimize")]
    pos = lsp.Position(0, 0)
    actions = await raw_request(client, lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), lsp.Range(pos, pos),
        lsp.CodeActionContext(diagnostics=[], only=[lsp.CodeActionKind.Source])))
    assert [(a["title"], a["kind"], a["command"]["command"]) for a in actions] == [
        ("Check now for v5p", "source", "pallasite.check")]
    assert actions[0]["command"]["arguments"] == [{"uri": uri}]


async def test_quick_fix_is_versioned_and_refused_for_unseen_version(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("renamed_api.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws")
    open_doc(client, uri, text, version=3)
    diags = await diagnostics_for(client, uri, 3)
    pls007 = [d for d in diags if d.code == "PLS007"]
    assert [d.range.start.line for d in pls007] == [21]
    actions = await client.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), pls007[0].range, lsp.CodeActionContext(diagnostics=pls007)))
    fixes = [a for a in actions if getattr(a, "kind", None) == lsp.CodeActionKind.QuickFix]
    assert len(fixes) == 1
    doc_edit = fixes[0].edit.document_changes[0]
    assert doc_edit.text_document.version == 3
    assert apply_text_edits(text, doc_edit.edits) == text.replace("pltpu.TPUCompilerParams(", "pltpu.CompilerParams(")
    # a diagnostic from a version this server never saw: no actions at all
    stale = [lsp.Diagnostic(range=d.range, message=d.message, code=d.code, data={**d.data, "version": 99})
             for d in pls007]
    none = await client.text_document_code_action_async(lsp.CodeActionParams(
        lsp.TextDocumentIdentifier(uri), pls007[0].range, lsp.CodeActionContext(diagnostics=stale)))
    assert not none


def apply_text_edits(text: str, edits) -> str:
    """Apply LSP edits (UTF-16 columns; the fixtures are ASCII) from the last to the first."""
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True)
    for e in ordered:
        start = offsets[e.range.start.line] + e.range.start.character
        end = offsets[e.range.end.line] + e.range.end.character
        text = text[:start] + e.new_text + text[end:]
    return text


# --------------------------------------------------------------------------- settings and commands


async def test_invalid_setting_is_shown_and_falls_back_for_that_key_only(client, tmp_path):
    answer_trust(client, "Not now")
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v5e"\ncheck = { debounceMs = "soon" }\n')
    await initialize(client, folder, {"tiers": [0, 7], "severity": {"PLS010": "off"}})
    for _ in range(100):
        if len(client.messages) >= 2:
            break
        await asyncio.sleep(0.05)
    shown = " | ".join(m.message for m in client.messages)
    assert "'check.debounceMs'" in shown and "'soon'" in shown and "150" in shown
    assert "'tiers'" in shown and "[0, 7]" in shown and "[0, 1, 2]" in shown
    stats = await raw_request(client, "pallasite/serverStats", None)
    assert stats["settings"]["target"] == "v5e"  # the valid key of the same source was kept
    assert stats["settings"]["severity"] == {"PLS010": "off"}
    assert stats["settings"]["check"]["debounceMs"] == 150


async def test_select_target_validates_and_updates_status_and_lenses(client, tmp_path):
    answer_trust(client, "Not now")
    _, uri, text = copy_fixture("tiling_broken.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws")
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    bad = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.selectTarget", arguments=["v99"]))
    assert bad["ok"] is False and "v99" in bad["message"]
    good = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.selectTarget", arguments=["v4"]))
    assert good == {"ok": True, "target": "v4"}
    assert client.statuses[-1]["target"] == "v4"
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert lenses[0].command.title == "Check for v4"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
async def test_columns_follow_the_negotiated_position_encoding(client, tmp_path, encoding):
    folder = tmp_path / "ws"
    _, uri, text = copy_fixture("tiling_broken.py", folder)
    # non-ASCII text before the bad dim on the same line: columns differ per encoding
    text = text.replace("    bad = pl.BlockSpec((BLOCK_ROWS, 100), lambda i, j: (i, j))",
                        "    bad = pl.BlockSpec(index_map=lambda i, j: (i if 'é😀' else j, j), block_shape=(BLOCK_ROWS, 100))")
    await initialize(client, folder, encoding=encoding)
    open_doc(client, uri, text)
    diags = await diagnostics_for(client, uri, 1)
    (bad,) = [d for d in diags if d.code == "PLS001"]
    line = text.splitlines()[16]
    units = lambda s: {"utf-8": len(s.encode()), "utf-16": len(s.encode("utf-16-le")) // 2,  # noqa: E731
                       "utf-32": len(s)}[encoding]
    col = line.index("100")
    assert (bad.range.start.character, bad.range.end.character) == (units(line[:col]), units(line[:col + 3]))
    change(client, uri, 2, (16, units(line[:col])), (16, units(line[:col + 3])), "128")
    diags = await diagnostics_for(client, uri, 2)
    assert codes_at(diags, "PLS001") == []


async def test_configuration_change_is_pulled_and_applied(client, tmp_path):
    _, uri, text = copy_fixture("tiling_broken.py", tmp_path / "ws")
    await initialize(client, tmp_path / "ws")
    open_doc(client, uri, text)
    await diagnostics_for(client, uri, 1)
    client.set_configuration({"target": "v5e", "severity": {"PLS001": "warning"}}, section="pallasite")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))
    diags = await diagnostics_for(client, uri, 1, predicate=lambda ds: any(
        d.code == "PLS001" and d.severity == lsp.DiagnosticSeverity.Warning for d in ds))
    assert codes_at(diags, "PLS001") == [16]
    for _ in range(100):
        if client.statuses and client.statuses[-1]["target"] == "v5e":
            break
        await asyncio.sleep(0.05)
    assert client.statuses[-1]["target"] == "v5e"

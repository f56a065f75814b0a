"""Trust comes only from the user, end to end over stdio: a project's own pyproject.toml cannot
grant it (nor start its worker interpreter, even from another trusted workspace folder), and files
opened before the client's settings arrive wait for them before the trust question is decided.
"""

from __future__ import annotations

import asyncio
import stat
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.protocol import default_converter
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from test_lsp import (  # noqa: F401  (client is a fixture)
    _answer_trust, _record_lens_refresh, _record_publish, _record_status, answer_trust, client, copy_fixture, diagnostics_for,
    initialize, open_doc, raw_request, server_env, stop_client,
)


async def until(condition, timeout: float = 15.0, what: str = "condition") -> None:
    async def wait():
        while not condition():
            await asyncio.sleep(0.05)
    try:
        await asyncio.wait_for(wait(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def recording_interpreter(folder: Path, marker: Path) -> Path:
    """A 'project interpreter' that leaves a marker file each time it is started, then runs Python."""
    script = folder / "project-python"
    script.write_text(f'#!/bin/sh\necho "$@" >> "{marker}"\nexec "{sys.executable}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


# --------------------------------------------------------------------------- the project cannot trust itself


@pytest.mark.parametrize("grant", ["mode", "folders"])
async def test_project_pyproject_cannot_grant_trust_or_start_its_interpreter(client, tmp_path, grant):
    folder = tmp_path / "ws"
    _, uri, text = copy_fixture("add_ok.py", folder)
    marker = tmp_path / "interpreter-started"
    script = recording_interpreter(folder, marker)
    trust = 'mode = "always"' if grant == "mode" else f'folders = ["{folder}"]'
    (folder / "pyproject.toml").write_text(
        f'[tool.pallasite]\ntiers = [0, 1]\nworker = {{ interpreter = "{script}" }}\n\n'
        f'[tool.pallasite.trust]\n{trust}\n')
    answer_trust(client, "Not now")
    await initialize(client, folder)
    open_doc(client, uri, text)
    await until(lambda: client.trust_answers, what="the trust question")
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
    await asyncio.sleep(1.0)  # a check started by the open or the save would start its worker by now

    assert len(client.trust_answers) == 1  # the user was asked, as for any folder
    shown = " | ".join(m.message for m in client.messages)
    assert f"'trust.{grant}' ignored: trust cannot be granted by the project's own pyproject.toml" in shown
    assert not marker.exists()  # no worker ran, with the project's interpreter or any other
    assert all(d.data["tier"] == 0 for p in client.published for d in p.diagnostics)
    assert client.statuses[-1]["trusted"] is False
    stats = await raw_request(client, "pallasite/serverStats", None)
    assert stats["settings"]["trust"] == {"mode": "ask", "folders": []}
    assert stats["settings"]["tiers"] == [0, 1]  # the project's other settings still apply
    assert stats["settings"]["worker"]["interpreter"] == str(script)

    if grant == "mode":  # once the USER trusts the folder, its worker runs (the marker works)
        result = await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="pallasite.trustFolder", arguments=[str(folder)]))
        assert result["ok"] is True
        await until(marker.exists, timeout=60, what="the worker to start after trusting")
        assert "pallasite" in marker.read_text()


# --------------------------------------------------------------------------- settings arriving late


def delayed_configuration_client(delay_s: float, answer: dict):
    """A client answering workspace/configuration only after ``delay_s`` seconds."""

    async def configuration(ls, params: lsp.ConfigurationParams):
        await asyncio.sleep(delay_s)
        ls.config_answered = True
        return [answer for _ in params.items]

    def make() -> LanguageClient:
        lsp_client = LanguageClient(converter_factory=default_converter)
        register_lsp_features(lsp_client, {
            **DEFAULT_CLIENT_FEATURES,
            lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _record_publish,
            lsp.WINDOW_SHOW_MESSAGE_REQUEST: _answer_trust,
            lsp.WORKSPACE_CONFIGURATION: configuration,
            "pallasite/status": _record_status,
            lsp.WORKSPACE_CODE_LENS_REFRESH: _record_lens_refresh,
        })
        lsp_client.published, lsp_client.statuses, lsp_client.trust_answers = [], [], []
        lsp_client.lens_refreshes = []
        lsp_client.trust_answer, lsp_client.config_answered = "Trust", False
        return lsp_client

    return make


async def start_delayed(home: Path, delay_s: float, answer: dict) -> LanguageClient:
    config = ClientServerConfig(server_command=[sys.executable, "-m", "pallasite.server.cli", "serve"],
                                server_env=server_env(home),
                                client_factory=delayed_configuration_client(delay_s, answer))
    return await config.start()


async def test_file_opened_before_the_settings_arrive_waits_for_them(tmp_path):
    lsp_client = await start_delayed(tmp_path / "home", 1.5, {"trust": {"mode": "never"}, "tiers": [0, 1]})
    try:
        _, uri, text = copy_fixture("add_ok.py", tmp_path / "ws")
        await initialize(lsp_client, tmp_path / "ws", {"tiers": [0, 1]})
        open_doc(lsp_client, uri, text)  # before the client has answered workspace/configuration
        await diagnostics_for(lsp_client, uri, 1)  # tier 0 does not wait
        await until(lambda: lsp_client.config_answered, what="the configuration answer")
        await until(lambda: lsp_client.statuses and lsp_client.statuses[-1]["trusted"] is False,
                    what="a status after the settings")
        await asyncio.sleep(1.0)  # a question decided with the old settings would have come by now
        assert lsp_client.trust_answers == []  # trust mode "never" from the client: never asked
        stats = await raw_request(lsp_client, "pallasite/serverStats", None)
        assert stats["settings"]["trust"]["mode"] == "never"
        assert all(d.data["tier"] == 0 for p in lsp_client.published for d in p.diagnostics)
        assert not (tmp_path / "home" / "xdg_config_home" / "pallasite" / "trusted-folders.json").exists()
    finally:
        await stop_client(lsp_client)


async def test_settings_that_never_come_fall_back_to_the_initialization_options(tmp_path):
    lsp_client = await start_delayed(tmp_path / "home", 5.0, {"trust": {"mode": "never"}})
    lsp_client.trust_answer = "Not now"
    try:
        _, uri, text = copy_fixture("add_ok.py", tmp_path / "ws")
        await initialize(lsp_client, tmp_path / "ws", {"tiers": [0, 1]})  # trust mode: "ask"
        open_doc(lsp_client, uri, text)
        await until(lambda: lsp_client.trust_answers, timeout=15, what="the trust question")
        assert not lsp_client.config_answered  # decided by the timeout, with the init options
        logged = " | ".join(m.message for m in lsp_client.log_messages)
        assert "no workspace/configuration answer within" in logged
        await until(lambda: lsp_client.config_answered, what="the late answer")  # nothing left pending
    finally:
        await stop_client(lsp_client)


async def test_a_trusted_folder_does_not_start_another_folders_project_interpreter(client, tmp_path):
    untrusted, trusted = tmp_path / "first", tmp_path / "second"
    untrusted.mkdir()
    marker = tmp_path / "interpreter-started"
    script = recording_interpreter(untrusted, marker)
    (untrusted / "pyproject.toml").write_text(f'[tool.pallasite]\nworker = {{ interpreter = "{script}" }}\n')
    _, uri, text = copy_fixture("add_ok.py", trusted)
    answer_trust(client, "Not now")
    await client.initialize_session(lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        workspace_folders=[lsp.WorkspaceFolder(uri=from_fs_path(str(f)), name=f.name) for f in (untrusted, trusted)],
        initialization_options={"pallasite": {"tiers": [0, 1], "check": {"onOpen": False},
                                              "trust": {"folders": [str(trusted)]}}}))
    open_doc(client, uri, text)
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="pallasite.check", arguments=[uri]))
    assert result["ok"] is True  # the trusted folder's file was checked...
    assert not marker.exists()  # ...without the untrusted project's interpreter
    shown = " | ".join(m.message for m in client.messages)
    assert f"the worker interpreter {script} named in {untrusted / 'pyproject.toml'}" in shown
    assert client.trust_answers == []

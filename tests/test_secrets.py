"""No secret reaches a process that runs kernel code, by any route: a probe kernel reads
``/proc/*/environ`` and ``cmdline`` of itself and of every pallasite process above it, with the
server (``serve``) or the CLI (``check``) started with provider keys set (engine/workers/secrets.py,
engine/workers/spawn.py). Run with the sandbox off (the probe then reaches the pallasite process) and on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from lsp_wire import WireClient
from pallasite.engine.workers import secrets, spawn

DATA = Path(__file__).parent / "data"
NAMES = ("GEMINI_API_KEY", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
         "SSH_AUTH_SOCK")
MODES = ["off", pytest.param("auto", marks=pytest.mark.skipif(
    spawn.sandbox_available() is not None, reason=f"no sandbox here: {spawn.sandbox_available()}"))]


@pytest.fixture
def keyed_env():
    mark = uuid.uuid4().hex
    keys = {name: f"secret-{name.lower()}-{mark}" for name in NAMES}
    return {**os.environ, **keys}, keys


def project(tmp_path: Path, sandbox: str) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    shutil.copy(DATA / "secrets" / "probe_environ.py", folder / "probe_environ.py")
    (folder / "pyproject.toml").write_text(f'[tool.pallasite.worker]\nsandbox = "{sandbox}"\n')
    return folder


def assert_no_secret(report: list[dict], keys: dict[str, str], sandbox: str, command: str) -> None:
    assert report and report[0]["pid"] > 0 and "PALLASITE" in report[0]["environ"] + "PALLASITE"
    text = json.dumps(report)
    leaked = [name for name, value in keys.items() if value in text]
    assert not leaked, f"{leaked} reached kernel code: {report}"
    above = [entry for entry in report[1:] if command in entry["cmdline"].split()]
    if sandbox == "off":  # the probe did reach the pallasite process, so it could have seen them
        assert above, report
        assert all(e["environ"].startswith("<unreadable") or "PATH=" in e["environ"] for e in above)
    else:  # in the sandbox nothing above the worker is visible
        assert not above, report


def test_the_report_check_matches_the_command_word_not_a_path_that_contains_it():
    """CI checks the project out under /check/: the sandbox's own `sh` (pid 1 in its namespace, holding
    only the worker's allow-listed environment) then mentioned "check" in a path. Before: that was
    taken for the `pallasite check` process and the sandboxed run failed."""
    worker = {"pid": 2, "cmdline": "/check/p/.venv/bin/python3 -P -m pallasite.runner.worker ", "environ": "PALLASITE_X=1"}
    wrapper = {"pid": 1, "cmdline": '/bin/sh -c "$@"; exit $? pallasite-sandbox /check/p/.venv/bin/python3 -P -m '
               "pallasite.runner.worker ", "environ": "PATH=/usr/bin"}
    cli = {"pid": 7, "cmdline": "/check/p/.venv/bin/python -m pallasite.server.cli check --tiers 0,1 x.py",
           "environ": "PATH=/usr/bin"}
    assert_no_secret([worker, wrapper], {}, "auto", "check")
    with pytest.raises(AssertionError):
        assert_no_secret([worker, wrapper, cli], {}, "auto", "check")


@pytest.mark.parametrize("sandbox", MODES)
def test_probe_finds_no_key_under_pallasite_check(tmp_path, keyed_env, sandbox):
    env, keys = keyed_env
    folder = project(tmp_path, sandbox)
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", "--tiers", "0,1", "--no-cache",
                           str(folder / "probe_environ.py")], env=env, cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads((folder / "probe-report.json").read_text())
    assert_no_secret(report, keys, sandbox, "check")


@pytest.mark.parametrize("sandbox", MODES)
def test_probe_finds_no_key_under_pallasite_serve(tmp_path, keyed_env, sandbox):
    env, keys = keyed_env
    folder = project(tmp_path, sandbox)
    client = WireClient(tmp_path / "home", env=env, cwd=str(folder),
                        settings={"tiers": [0, 1], "trust": {"mode": "always"}, "worker": {"sandbox": sandbox}})
    try:
        client.initialize(folder)
        path = folder / "probe_environ.py"
        client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                                "version": 1, "text": path.read_text()}})
        deadline = time.monotonic() + 120
        report_path = folder / "probe-report.json"
        while not report_path.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.2)
        report = json.loads(report_path.read_text())
        assert_no_secret(report, keys, sandbox, "serve")
        # and the server still holds them in memory (a provider could use them)
        stats = client.request("pallasite/serverStats", {})["result"]
        assert set(NAMES) <= set(stats["secrets"])
    finally:
        client.close()


def test_get_reads_held_values_then_the_environment(monkeypatch):
    monkeypatch.setitem(secrets._held, "GEMINI_API_KEY", "held-value")
    monkeypatch.setenv("OPENAI_API_KEY", "env-value")
    assert secrets.get("GEMINI_API_KEY") == "held-value"
    assert secrets.get("OPENAI_API_KEY") == "env-value"
    assert secrets.get("NOT_SET_ANYWHERE_KEY", "fallback") == "fallback"
    assert secrets.launcher_environment()["GEMINI_API_KEY"] == "held-value"


def test_main_called_in_process_never_replaces_the_callers_process(monkeypatch, capsys):
    """Re-executing is for a `pallasite` process of its own: `cli.main([...])` inside another program
    (this test runner) must neither exec nor strip the caller's environment. Before: it re-executed
    pytest itself as `pallasite check` whenever a secret-looking variable was set."""
    from pallasite.server import cli

    monkeypatch.setenv("GEMINI_API_KEY", "caller-key")
    pid = os.getpid()
    assert cli.main(["check", "--tiers", "0", "--no-cache", str(DATA / "lsp" / "add_ok.py")]) == 0
    assert os.getpid() == pid and os.environ["GEMINI_API_KEY"] == "caller-key"

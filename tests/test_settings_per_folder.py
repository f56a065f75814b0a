"""Settings are per workspace folder: each folder's own `workspace/configuration` (scoped to it)
applies to its documents only. Before: one folder's tiers applied to every folder's checks.
Folder B asks for tier 0 only; its kernel writes probe-report.json if it is ever imported."""

from __future__ import annotations

import pytest

import shutil
import time
from pathlib import Path

from lsp_wire import WireClient

DATA = Path(__file__).parent / "data"


@pytest.mark.pipeline
def test_one_folders_tiers_do_not_apply_to_another(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    shutil.copy(DATA / "lsp" / "add_ok.py", a / "add_ok.py")
    shutil.copy(DATA / "secrets" / "probe_environ.py", b / "probe_environ.py")
    client = WireClient(tmp_path / "home", settings={"tiers": [0, 1], "trust": {"mode": "always"}})
    client.settings_by_scope[b.as_uri()] = {"tiers": [0], "trust": {"mode": "always"}}
    try:
        params = {"processId": None, "rootUri": a.as_uri(), "capabilities": {"workspace": {"configuration": True}},
                  "workspaceFolders": [{"uri": a.as_uri(), "name": "a"}, {"uri": b.as_uri(), "name": "b"}]}
        client.request("initialize", params, timeout=30)
        client.notify("initialized", {})
        for path in (b / "probe_environ.py", a / "add_ok.py"):
            client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                                    "version": 1, "text": path.read_text()}})
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            stats = client.request("pallasite/serverStats", {})["result"]
            if stats["checksStarted"] >= 1:
                break
            time.sleep(0.1)
        time.sleep(3.0)  # time for a wrongly started check of b's file to import it
        stats = client.request("pallasite/serverStats", {})["result"]
        assert stats["checksStarted"] == 1, stats  # a's file only
        assert not (b / "probe-report.json").exists(), "folder b's tier-0-only setting was ignored"
    finally:
        client.close()

"""`trust.mode = "never"` means never: the pallasite.trustFolder command (before: it ran the folder's
code and recorded the folder as trusted while the status said untrusted) and pallasite.check run
nothing and record nothing. The kernel opened writes probe-report.json if it is ever imported."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from lsp_wire import WireClient

DATA = Path(__file__).parent / "data"


def test_never_plus_trust_folder_runs_nothing(tmp_path):
    folder = tmp_path / "ws"
    folder.mkdir()
    path = folder / "probe_environ.py"
    shutil.copy(DATA / "secrets" / "probe_environ.py", path)
    home = tmp_path / "home"
    client = WireClient(home, settings={"tiers": [0, 1], "trust": {"mode": "never"}}, trust_answer="Trust")
    try:
        client.initialize(folder)
        client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                                "version": 1, "text": path.read_text()}})
        reply = client.request("workspace/executeCommand",
                               {"command": "pallasite.trustFolder", "arguments": [str(folder)]}, timeout=20)
        assert reply["result"]["ok"] is False and '"never"' in reply["result"]["message"]
        everything = client.request("workspace/executeCommand", {"command": "pallasite.trustFolder"}, timeout=20)
        assert everything["result"]["ok"] is False
        check = client.request("workspace/executeCommand",
                               {"command": "pallasite.check", "arguments": [{"uri": path.as_uri(), "tiers": [1]}]},
                               timeout=20)
        assert check["result"]["ok"] is False and "not trusted" in check["result"]["message"]
        time.sleep(2.0)  # time for anything wrongly started to reach the kernel
        stats = client.request("pallasite/serverStats", {})["result"]
        assert stats["checksStarted"] == 0 and stats["status"]["trusted"] is False
        assert not (folder / "probe-report.json").exists(), "the folder's code ran"
        assert not (home / "xdg_config_home" / "pallasite" / "trusted-folders.json").exists()
        assert client.trust_questions == []  # never asks either
    finally:
        client.close()

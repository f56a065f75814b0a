"""The VS Code extension (editor_clients/vscode) against the server it starts.

Always run (no Node needed): package.json's settings are the server's `pallasite settings
--schema`, and every palette command is bound to a command the real server advertises in its
initialize result. Marked slow (CI runs editor_clients/vscode/ci.sh instead): the npm steps -
type-check, unit tests, manifest check and the .vsix build - when node_modules is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

VSCODE = Path(__file__).resolve().parent.parent / "editor_clients" / "vscode"
MANIFEST = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
CLIENT_ONLY = {"pallasite.serverPath", "pallasite.interpreter", "pallasite.trace.server"}
VSCODE_ONLY_ATTRIBUTES = {"order", "scope"}


def server_schema() -> dict:
    out = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "settings", "--schema"],
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return json.loads(out)


def flatten(schema: dict, prefix: str = "pallasite") -> dict[str, dict]:
    """Nested settings schema -> VS Code's dotted keys (objects with properties are expanded)."""
    out: dict[str, dict] = {}
    for key, sub in schema["properties"].items():
        if sub.get("type") == "object" and "properties" in sub:
            out.update(flatten(sub, f"{prefix}.{key}"))
        else:
            out[f"{prefix}.{key}"] = sub
    return out


def test_configuration_is_the_server_schema() -> None:
    expected = flatten(server_schema())
    declared = MANIFEST["contributes"]["configuration"]["properties"]
    server_keys = [k for k in declared if k not in CLIENT_ONLY]
    assert set(server_keys) == set(expected), "run `npm run sync-manifest` in editor_clients/vscode"
    for key, leaf in expected.items():
        ours = {k: v for k, v in declared[key].items() if k not in VSCODE_ONLY_ATTRIBUTES}
        assert ours == leaf, f"{key}: package.json {ours} != schema {leaf}"
    # Schema order is kept, and the client-only keys come last.
    assert server_keys == list(expected)
    assert list(declared)[-len(CLIENT_ONLY):] == [k for k in declared if k in CLIENT_ONLY]
    assert {k for k in declared if k in CLIENT_ONLY} == CLIENT_ONLY
    # A folder's own settings cannot trust itself.
    for key in ("pallasite.trust.mode", "pallasite.trust.folders"):
        assert declared[key]["scope"] == "application"


def _lsp_initialize(command: list[str]) -> dict:
    """Send initialize + shutdown + exit over stdio; return the initialize result."""
    def frame(message: dict) -> bytes:
        body = json.dumps(message).encode()
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"processId": os.getpid(), "rootUri": None, "capabilities": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown"},
        {"jsonrpc": "2.0", "method": "exit"},
    ]
    proc = subprocess.run(command, input=b"".join(frame(m) for m in requests), capture_output=True, timeout=60)
    data, messages = proc.stdout, []
    while data:
        header, _, rest = data.partition(b"\r\n\r\n")
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        messages.append(json.loads(rest[:length]))
        data = rest[length:]
    answer = next(m for m in messages if m.get("id") == 1)
    assert "result" in answer, answer
    return answer["result"]


def test_every_palette_command_leads_to_an_advertised_server_command() -> None:
    result = _lsp_initialize([sys.executable, "-m", "pallasite.server.cli", "serve"])
    advertised = set(result["capabilities"]["executeCommandProvider"]["commands"])
    palette = MANIFEST["contributes"]["menus"]["commandPalette"]
    commands = MANIFEST["contributes"]["commands"]
    assert [c["command"] for c in commands] == [p["command"] for p in palette]
    for entry, command in zip(palette, commands):
        key = entry["when"].split(" ")[0]
        assert key.startswith("pallasite.advertises."), entry
        assert command["enablement"] == key
        server_command = "pallasite." + key.removeprefix("pallasite.advertises.")
        assert server_command in advertised, f"{entry['command']} is bound to {server_command}, which the server lacks"
    assert {"pallasite.check", "pallasite.selectTarget", "pallasite.trustFolder"} <= advertised
    # The chip quick pick offers what the server accepts.
    chips = MANIFEST["contributes"]["configuration"]["properties"]["pallasite.target"]["enum"]
    assert chips == server_schema()["properties"]["target"]["enum"]


NPM = shutil.which("npm")


@pytest.mark.slow
@pytest.mark.skipif(NPM is None or not (VSCODE / "node_modules").is_dir(),
                    reason="needs Node/npm and `npm ci` in editor_clients/vscode (CI: editor_clients/vscode/ci.sh)")
def test_typecheck_unit_tests_manifest_and_vsix() -> None:
    env = {**os.environ, "PALLASITE_PYTHON": sys.executable, "npm_config_update_notifier": "false"}

    def npm(*args: str) -> str:
        proc = subprocess.run([NPM, "run", *args], cwd=VSCODE, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"npm run {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout + proc.stderr

    npm("typecheck")
    tests = npm("test")
    assert "# fail 0" in tests and "# skipped 0" in tests, tests
    assert "in step" in npm("check-manifest")
    npm("package")
    with zipfile.ZipFile(VSCODE / "dist" / "pallasite.vsix") as vsix:
        names = set(vsix.namelist())
        packaged = json.loads(vsix.read("extension/package.json"))
    assert {"extension/dist/extension.js", "extension/package.json", "extension/readme.md"} <= names
    assert not any(n.startswith(("extension/src/", "extension/node_modules/")) for n in names)
    assert packaged["main"] == "./dist/extension.js"
    assert packaged["contributes"] == MANIFEST["contributes"]

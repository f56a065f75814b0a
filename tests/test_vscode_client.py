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
    # Both optimize modes, the step-mode decisions and search are in the palette.
    bound = {c["command"]: c["enablement"] for c in commands}
    assert {"pallasite.optimize", "pallasite.optimizeStep", "pallasite.optimize.approve", "pallasite.optimize.revise",
            "pallasite.optimize.stop", "pallasite.search"} <= set(bound)
    assert bound["pallasite.optimizeStep"] == "pallasite.advertises.optimize"
    # Plan / diff documents (.pallasite/plans/) carry Approve, Revise and Stop in their title bar.
    title = MANIFEST["contributes"]["menus"]["editor/title"]
    assert [t["command"] for t in title] == ["pallasite.optimize.approve", "pallasite.optimize.revise",
                                             "pallasite.optimize.stop"]
    for entry in title:
        key, _, condition = entry["when"].partition(" && ")
        assert "pallasite." + key.removeprefix("pallasite.advertises.") in advertised, entry
        assert condition == r"resourcePath =~ /\.pallasite.plans./", entry
        assert entry["group"].startswith("navigation")
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


def _e2e(scenario: str, python: str, tmp_path: Path, project_target: str = "v6e",
         kernel: str = "add_bad_tiling.py", files: dict[str, Path] | None = None, **env: str) -> dict:
    build = subprocess.run([NPM, "run", "bundle"], cwd=VSCODE, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    project = shutil.copytree(ROOT_DATA / "project", tmp_path / "project")
    for name, source in (files or {}).items():
        shutil.copy(source, project / name)
    pyproject = project / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('target = "v6e"', f'target = "{project_target}"'))
    proc = subprocess.run(["node", str(VSCODE / "test" / "e2e" / "run-e2e.js"), scenario, python, str(project),
                           str(project / kernel)], cwd=project, capture_output=True, text=True,
                          timeout=240, env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"),
                                            "PALLASITE_E2E_CHIP": project_target, **env})
    assert proc.returncode == 0 and "RESULT " in proc.stdout, proc.stdout + proc.stderr
    return json.loads(proc.stdout.split("RESULT ", 1)[1].splitlines()[0])


ROOT_DATA = Path(__file__).resolve().parent / "data" / "clients"
needs_node_modules = pytest.mark.skipif(
    NPM is None or not (VSCODE / "node_modules").is_dir(),
    reason="needs Node/npm and `npm ci` in editor_clients/vscode (CI: editor_clients/vscode/ci.sh)")


@needs_node_modules
def test_bundled_extension_runs_the_server(tmp_path: Path) -> None:
    """dist/extension.js in Node with a stand-in `vscode` module, against a real `pallasite serve`."""
    # The project says v5p in [tool.pallasite]; the extension sends only what the user set, so
    # VS Code's default ("v6e") does not override the project.
    r = _e2e("server", sys.executable, tmp_path, project_target="v5p")
    advertised = {k: v for k, v in r["contextsAfterStart"].items() if k.startswith("pallasite.advertises.")}
    from pallasite.server.lsp import server  # what the server advertises, read from the server itself

    assert advertised == {f"pallasite.advertises.{c.removeprefix('pallasite.')}": True for c in server.protocol.fm.commands}
    assert {"pallasite.advertises.check", "pallasite.advertises.selectTarget", "pallasite.advertises.trustFolder",
            "pallasite.advertises.explain"} <= set(advertised)
    assert [(d["line"], d["code"]) for d in r["diagnostics"]] == [(12, "PLS001")]
    # (then the active file's verdict, once the server has one: "· tier 0: 1 error(s)")
    assert r["statusBefore"].startswith("$(circuit-board) v5p · local · idle · $(workspace-untrusted) untrusted")
    assert r["statusCommand"] == "pallasite.selectTarget"
    # Palette "Select Target TPU Chip": quick pick of the schema's chips -> server -> status bar.
    assert r["quickPicks"][0]["items"] == MANIFEST["contributes"]["configuration"]["properties"]["pallasite.target"]["enum"]
    assert r["selectResult"] == {"ok": True, "target": "v5e"}
    assert r["statusAfter"].startswith("$(circuit-board) v5e · local")
    # Palette "Check ... Tier 3" in an untrusted folder: the server's refusal is shown.
    assert r["tier3Result"]["ok"] is False
    assert [m["level"] for m in r["messages"]] == ["warning"] and "not trusted" in r["messages"][0]["message"]
    # Palette "Explain Finding" on the diagnostic: the catalog's markdown for its code opens beside.
    assert r["explainAtCursor"]["ok"] is True and r["explainAtCursor"]["code"] == "PLS001"
    # With no diagnostic at the cursor the code is asked for ("pls201" typed) and normalised.
    assert [b["answer"] for b in r["inputBoxes"]] == ["pls201"]
    assert r["explainTyped"]["code"] == "PLS201"
    opened = r["openedDocuments"]
    assert [d["language"] for d in opened] == ["markdown", "markdown"]
    assert opened[0]["content"] == r["explainAtCursor"]["markdown"] and opened[0]["content"].startswith("### PLS001")
    assert opened[1]["content"].startswith("### PLS201")
    assert len(r["shownDocuments"]) == 2
    # "Trust This Folder" stays offered: the status said the folder is not trusted.
    assert r["contextsAfterStop"]["pallasite.folderTrusted"] is False
    assert all(v is False for k, v in r["contextsAfterStop"].items() if k.startswith("pallasite.advertises."))


@needs_node_modules
def test_bundled_extension_answers_the_trust_question(tmp_path: Path) -> None:
    """trust.mode "ask", tiers 0-1: the server asks once through the extension, "Trust" is pressed;
    then "Check as Script" on a file whose __main__ runs the kernel."""
    r = _e2e("trust", sys.executable, tmp_path, kernel="running_total.py")
    [question] = r["questions"]
    assert question["items"] == ["Trust", "Not now"]
    assert str((tmp_path / "project").resolve()) in question["message"]
    assert r["otherMessages"] == []
    # pallasite/status says trusted: the status bar drops "untrusted", "Trust This Folder" is hidden.
    assert r["trustedContext"] is True
    assert " v6e · local · " in r["statusTrusted"] and "untrusted" not in r["statusTrusted"], r["statusTrusted"]
    # A check now runs without a second question, and the answer was remembered.
    assert r["checkResult"]["ok"] is True and r["checkResult"]["chip"] == "v6e"
    # "Check as Script" sent {uri, script: true}: the server ran __main__, and the lowering's verdict
    # on the pallas_call it made is at the kernel's line (jnp.cumsum, 0-based 13).
    assert r["scriptResult"]["ok"] is True and r["scriptResult"]["script"] is True, r["scriptResult"]
    assert [d["line"] for d in r["scriptDiagnostics"] if d["code"].startswith("PLS1")] == [13], r["scriptDiagnostics"]
    store = tmp_path / "config" / "pallasite" / "trusted-folders.json"
    assert str((tmp_path / "project").resolve()) in json.loads(store.read_text())["trusted"]


@needs_node_modules
def test_bundled_extension_without_pallasite_says_how_to_install(tmp_path: Path) -> None:
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    python = str(bare / "bin" / "python")
    r = _e2e("missing", python, tmp_path)
    assert r["status"] == "$(error) pallasite not installed"
    [message] = r["messages"]
    assert message["level"] == "error" and message["items"] == ["Open Settings", "Show Output"]
    assert f"`{python} -m pip install /path/to/pallasite`" in message["message"]
    assert "pip install pallasite" not in message["message"]  # on no package index
    assert "No module named 'pallasite'" in message["message"]
    assert r["contexts"] == {}  # no palette entry is enabled

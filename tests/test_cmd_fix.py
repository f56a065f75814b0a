"""`pallasite fix` with the scripted provider: text and JSON output, --apply, --line, replay, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_fixer import RIGHT, WRONG

AGENTS = Path(__file__).parent / "data" / "agents"


def project(tmp_path: Path, replies: list) -> tuple[Path, Path]:
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)  # this test's own results store (not one in a parent folder)
    (folder / "pyproject.toml").write_text(
        "[tool.pallasite]\ntiers = [0]\nagent = { maxRounds = 2, docsPassages = 0, baseUrl = 'http://evil.example' }\n")
    kernel = folder / "kernel.py"
    kernel.write_text((AGENTS / "add_bad_tiling.py").read_text())
    script = folder / "replies.json"
    script.write_text(json.dumps(replies))
    return kernel, script


def fix(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", "fix", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def test_fix_prints_the_verified_diff_and_applies_it(tmp_path):
    kernel, script = project(tmp_path, [WRONG, RIGHT])
    before = kernel.read_text()
    done = fix(str(kernel), "--provider", "scripted", "--scripted-file", str(script), cwd=kernel.parent)
    assert done.returncode == 0, done.stderr
    assert "-BLOCK_COLS = 100\n+BLOCK_COLS = 128" in done.stdout
    assert "verified fix: not compiled for the chip: tier 2 was not run (tier 0 passed)" in done.stdout
    assert "not applied (use --apply" in done.stdout and kernel.read_text() == before
    # a project cannot choose where the code is sent: its agent.baseUrl is dropped, with a message
    assert "'agent.baseUrl' ignored" in done.stderr
    done = fix(str(kernel), "--provider", "scripted", "--scripted-file", str(script), "--apply", "--format", "json",
               cwd=kernel.parent)
    data = json.loads(done.stdout)
    assert done.returncode == 0 and data["version"] == 1 and data["applied"] and data["rounds"] == 2
    assert data["usage"]["calls"] == 2 and data["edits"] == [{"line": 9, "end_line": 10, "new_text": "BLOCK_COLS = 128\n"}]
    assert kernel.read_text() == before.replace("BLOCK_COLS = 100", "BLOCK_COLS = 128")
    # the run replays from the store without the model
    kernel.write_text(before)
    again = fix(str(kernel), "--provider", f"replay:{data['run_id']}", "--format", "json", cwd=kernel.parent)
    assert json.loads(again.stdout)["fixed_text"] == data["fixed_text"]


def test_no_verified_fix_exits_1_and_lists_the_rounds(tmp_path):
    kernel, script = project(tmp_path, [WRONG, "garbage"])
    done = fix(str(kernel), "--provider", "scripted", "--scripted-file", str(script), cwd=kernel.parent)
    assert done.returncode == 1
    assert "no verified fix: round 1: still failing; round 2: unreadable" in done.stdout
    assert "round 1: still failing: the checker reports on the edited file:" in done.stdout
    # the finding itself follows (it stopped at the colon): the line, the code and the tier
    after = done.stdout.split("the checker reports on the edited file:", 1)[1].splitlines()[1]
    assert after.startswith("    - line ") and "PLS001 [tier 0" in after, done.stdout


def test_usage_errors_exit_2(tmp_path):
    kernel, script = project(tmp_path, [RIGHT])
    assert fix(str(tmp_path / "missing.py"), cwd=tmp_path).returncode == 2
    done = fix(str(kernel), cwd=kernel.parent)  # no provider configured
    assert done.returncode == 2 and "no LLM provider is configured" in done.stderr
    done = fix(str(kernel), "--provider", "scripted", "--scripted-file", str(script), "--line", "1", cwd=kernel.parent)
    assert done.returncode == 0 and "nothing to fix: no error on line 1" in done.stdout

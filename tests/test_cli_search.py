"""`pallasite search FILE` end to end with the scripted provider and real local workers: each node is
one optimize iteration (tested in interpret mode, estimated for the chip), the graph and the report
are written, every node is stored, and the same command again resumes instead of re-asking."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.analysis.verdict import COST_MODEL, JUDGED_WHY, JudgedBy

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

ROOT = (Path(__file__).parent / "data" / "search" / "add_reference.py").read_text()


def search(folder: Path, script: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", "search", str(folder / "add.py"),
                           "--algo", "parallel", "--trajectories", "1", "--iterations", "1", "--target", "v5e",
                           "--provider", "scripted", "--scripted-file", str(script), "--jobs", "1"],
                          capture_output=True, text=True, timeout=300, cwd=folder)


def test_search_cli_runs_optimize_iterations_and_resumes(tmp_path):
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    (folder / "add.py").write_text(ROOT)
    faster = re.sub(r"BLOCK_ROWS = \d+", "BLOCK_ROWS = 64", ROOT)
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["Bigger blocks\nUse 64-row blocks: fewer grid steps.", f"```python\n{faster}```"]))
    proc = search(folder, script)
    assert proc.returncode == 0, proc.stderr
    # who compared and timed the node (the worker's judged_by) in the JSON, the text and the HTML report
    report = next((folder / ".pallasite" / "search").glob("*.json"))
    judged = json.loads(report.read_text())["nodes"][1]["verdict"]["judged_by"]
    assert judged == "the judge" and JudgedBy.of(judged) is JudgedBy.JUDGE
    # and what that means, beside it (issue 52: the line stood after every table unexplained)
    assert f"judged by {JudgedBy.JUDGE.text()}: node t0.1; {JUDGED_WHY[JudgedBy.JUDGE]}" in proc.stdout
    assert "judged by the judge (from the candidate's exported program; its process never judges): node t0.1" \
        in proc.stdout and "could not fake either (docs/safety.md)" in proc.stdout
    assert f"<td>{judged}</td>" in report.with_suffix(".html").read_text()
    assert re.search(r"best: t0\.1 \d+\.\d\dx against the starting kernel \[estimate \(pallasite roofline v5, v5e\)", proc.stdout), proc.stdout
    # the loop's phases are progress, shown live on a terminal only (issue 59): not in this captured stderr; the
    # node's line, under a header, says what it changed (its plan's title), not the strategy it was drawn
    assert "t0.1 test: ok" not in proc.stderr and "t0.1 profile: ok" not in proc.stderr
    head = next(line for line in proc.stderr.splitlines() if line.strip().startswith("node "))
    assert "status" in head and "speedup" in head and "what it changed" in head
    assert re.search(r"^  t0\.1 .*x  Bigger blocks$", proc.stderr, re.M), proc.stderr
    rid = re.search(r"run (search-\w+)", proc.stdout).group(1)
    graph = json.loads((folder / ".pallasite" / "search" / f"{rid}.json").read_text())
    root, node = graph["nodes"]
    assert node["loop_word"] == "valid" and node["plan"].startswith("Bigger blocks")
    assert [p["phase"] for p in node["phases"]] == ["plan", "implement", "compile", "test", "autotune", "profile"]
    assert node["speedup"] > 1.0 and root["speedup"] == 1.0 and node["provenance"].startswith(f"estimate ({COST_MODEL}, v5e)")
    assert (folder / ".pallasite" / "search" / f"{rid}.html").is_file()
    # again: everything is read back from the store; the (now empty) script is never asked
    script.write_text("[]")
    again = search(folder, script)
    assert again.returncode == 0, again.stderr
    assert f"resuming {rid}: 2 nodes already done" in again.stderr and "best: t0.1" in again.stdout
    # a replay of the recorded search (each node's recorded answers) gives the same graph
    replay = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "search", str(folder / "add.py"),
                             "--algo", "parallel", "--trajectories", "1", "--iterations", "1", "--target", "v5e",
                             "--provider", f"replay:{rid}", "--jobs", "1"],
                            capture_output=True, text=True, timeout=300, cwd=folder)
    assert replay.returncode == 0, replay.stderr
    rid2 = re.search(r"run (search-\w+)", replay.stdout).group(1)
    replayed = json.loads((folder / ".pallasite" / "search" / f"{rid2}.json").read_text())
    assert rid2 != rid and [(n["id"], n["plan"], n["loop_word"]) for n in replayed["nodes"]] == \
        [(n["id"], n["plan"], n["loop_word"]) for n in graph["nodes"]]


def test_a_search_whose_every_node_failed_says_why_and_exits_1(tmp_path):
    """It exited 0 and said why only in the JSON and HTML."""
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    (folder / "add.py").write_text(ROOT)
    wrong = ROOT.replace("x_ref[...] + y_ref[...]", "x_ref[...] - y_ref[...]")
    assert wrong != ROOT
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["Subtract\nA wrong kernel.", f"```python\n{wrong}```"]))
    proc = search(folder, script)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "error: none of the 1 node(s) compiled, passed the tests and was timed" in proc.stderr
    assert re.search(r"t0\.1: compiled, wrong: .*wrong_result", proc.stderr), proc.stderr


def test_search_takes_the_projects_target_where_the_command_line_gives_none(tmp_path):
    """`search` estimated for a fixed v6e, unlike check, tune and optimize (a project's file still
    cannot choose the provider: that stays the user's)."""
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    (folder / "add.py").write_text(ROOT)
    (folder / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v5e"\n')
    faster = re.sub(r"BLOCK_ROWS = \d+", "BLOCK_ROWS = 64", ROOT)
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["Bigger blocks\nUse 64-row blocks.", f"```python\n{faster}```"]))
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "search", str(folder / "add.py"), "--algo",
                           "parallel", "--trajectories", "1", "--iterations", "1", "--provider", "scripted",
                           "--scripted-file", str(script), "--jobs", "1"],
                          capture_output=True, text=True, timeout=300, cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert f"[estimate ({COST_MODEL}, v5e)" in proc.stdout, proc.stdout

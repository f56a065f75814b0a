"""`pallasite optimize` as a user runs it: killed mid-iteration, resumed, exported, replayed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pallasite.agents.optimize_record import replay_table

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

DATA = Path(__file__).parent / "data" / "optimize"


def reply_pair(name: str, delay_s: float = 0.0) -> list:
    plan = {"text": f"Try {name}\nbecause.", "delay_s": delay_s} if delay_s else f"Try {name}\nbecause."
    return [plan, "```python\n" + (DATA / "candidates" / f"{name}.py").read_text() + "```"]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pallasite.server.cli", "optimize", *args]


def test_killed_run_resumes_and_replays(tmp_path):
    shutil.copy(DATA / "add.py", tmp_path / "add.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    first = tmp_path / "first.json"
    first.write_text(json.dumps(reply_pair("bad_tiling") + reply_pair("big_blocks", delay_s=120)))
    proc = subprocess.Popen(cli("add.py", "--provider", "scripted", "--scripted-file", str(first), "--iterations", "2"),
                            cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    run_id, lines = None, []
    try:
        for line in proc.stderr:  # wait until iteration 2 is planning (its model call hangs)
            lines.append(line)
            if "run " in line and run_id is None and line.startswith("pallasite optimize: run "):
                run_id = line.split("run ", 1)[1].split(",")[0]
            if line.startswith("[2] plan: planning"):
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert run_id, "".join(lines)
    second = tmp_path / "second.json"
    second.write_text(json.dumps(reply_pair("big_blocks")))
    done = subprocess.run(cli("add.py", "--provider", "scripted", "--scripted-file", str(second), "--iterations", "2",
                              "--resume", run_id, "--format", "json"), cwd=tmp_path, capture_output=True, text=True,
                          timeout=280)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert [r["loop_word"] for r in result["table"]] == ["not compiled", "valid"]
    assert result["best"] == 2 and result["speedup"] > 1 and result["method"] == "estimate (v6e)"
    assert (tmp_path / "add.optimized.py").read_text() == (DATA / "candidates" / "big_blocks.py").read_text()
    exported = subprocess.run(cli("add.py", "--resume", run_id, "--export"), cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
    assert replay_table(json.loads(exported.stdout)) == result["table"]


def written(name: str) -> str:
    return (DATA / "tests" / f"{name}.py").read_text()


def test_write_tests_then_a_run_uses_them_with_budgets_and_fix_rounds(tmp_path):
    shutil.copy(DATA / "no_tests.py", tmp_path / "axpy.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    proposals = tmp_path / "tests.json"
    proposals.write_text(json.dumps(["```python\n" + written("axpy_wrong") + "```",
                                     "```python\n" + written("axpy_right") + "```"]))
    done = subprocess.run(cli("axpy.py", "--provider", "scripted", "--scripted-file", str(proposals), "--write-tests"),
                          cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr
    tests_file = tmp_path / "axpy.tests.py"
    assert "return 2.0 * x + y" in tests_file.read_text() and "wrote" in done.stdout
    assert "[tests] round 2" in done.stderr and not (tmp_path / "axpy.optimized.py").exists()
    # the reviewed file is the run's tests; a candidate with 7-row blocks is fixed by the verified fixer
    bad = (DATA / "no_tests.py").read_text().replace("(8, x.shape[1])", "(7, x.shape[1])").replace("// 8", "// 7")
    fix = {"explanation": "rows in multiples of 8", "edits": [
        {"search": "(7, x.shape[1])", "replace": "(32, x.shape[1])"}, {"search": "// 7", "replace": "// 32"}]}
    replies = tmp_path / "run.json"
    replies.write_text(json.dumps(["Bigger blocks\nfewer steps.", "```python\n" + bad + "```", json.dumps(fix)]))
    run = subprocess.run(cli("axpy.py", "--provider", "scripted", "--scripted-file", str(replies), "--iterations", "1",
                             "--fix-rounds", "1", "--max-tokens", "100000", "--format", "json"),
                         cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert [r["loop_word"] for r in result["table"]] == ["valid"] and result["speedup"] > 1
    assert "fixed: verified fix" in run.stderr
    assert result["budgets"]["iterations"] == {"used": 1, "limit": 1}
    assert result["budgets"]["tokens"]["limit"] == 100000 and result["budgets"]["tokens"]["used"] > 0
    assert result["tests"]["hash"] and "axpy.tests.py" in result["tests"]["written"]
    for phase in ("test", "autotune", "profile"):
        assert f"[1] {phase}: ok" in run.stderr, run.stderr
    # the tests file edited after the run started: resuming it is refused, with the reason
    tests_file.write_text(tests_file.read_text().replace("rows: int = 64", "rows: int = 128"))
    again = subprocess.run(cli("axpy.py", "--provider", "scripted", "--scripted-file", str(replies), "--iterations", "2",
                               "--resume", result["run_id"]), cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert again.returncode == 2 and "the frozen tests differ" in again.stderr, again.stderr


def test_step_mode_shows_the_proposed_tests_before_iteration_one(tmp_path):
    shutil.copy(DATA / "no_tests.py", tmp_path / "axpy.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    replies = tmp_path / "r.json"
    replies.write_text(json.dumps(["```python\n" + written("axpy_right") + "```"]))
    done = subprocess.run(cli("axpy.py", "--provider", "scripted", "--scripted-file", str(replies), "--mode", "step",
                              "--format", "json"), cwd=tmp_path, input="s\n", capture_output=True, text=True, timeout=280)
    assert "proposed tests (validated" in done.stderr and "return 2.0 * x + y" in done.stderr, done.stderr
    shown = list((tmp_path / ".pallasite" / "plans").glob("*-tests.py"))
    assert len(shown) == 1 and "def reference" in shown[0].read_text()
    result = json.loads(done.stdout)
    assert result["stopped"] == "stopped by the user at the tests" and result["table"] == []

"""Ctrl-C on `check` and `eval` keeps the finished work (issue 52): before, both exited 130 silently,
a check's finished files unprinted and an eval's finished tasks lost (the re-run started over).

Each test runs the real command, waits for a line that says a file or task is finished while another
is still running (a kernel whose ``example_inputs()`` sleeps two minutes), then sends SIGINT."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from interrupting import interrupt_at

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

DATA = Path(__file__).parent / "data"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pallasite.server.cli", *args]


def test_ctrl_c_on_check_prints_the_finished_files_and_keeps_them(tmp_path):
    shutil.copy(DATA / "cli" / "bad_block.py", tmp_path / "a_bad.py")
    shutil.copy(DATA / "newcomer" / "z_slow_inputs.py", tmp_path / "z_slow.py")
    shutil.copy(Path(__file__).parent.parent / "examples" / "add.py", tmp_path / "b_add.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    done = interrupt_at(_cli("check", ".", "--jobs", "3", "-v"), tmp_path, "b_add.py: tiers 0,1 ran",
                        stream="stdout")  # printed after a_bad.py (path order), while z_slow.py's inputs sleep
    out, err = done.stdout, done.stderr
    assert done.returncode == 130, out + err
    assert "a_bad.py:12:" in out and "error[PLS001]" in out  # the finished files, with their findings
    assert out.splitlines()[-1].startswith("2 file(s) checked for v6e"), out  # the summary of what was done
    assert "interrupted after 2 of 3 file(s)" in err, err
    assert "results store" in err and "Traceback" not in err
    info = subprocess.run(_cli("store", "info"), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert [line.split() for line in info.stdout.splitlines() if line.strip().startswith("checks")] == [
        ["checks", "1"]], info.stdout


def test_ctrl_c_on_eval_lists_the_finished_tasks_and_the_same_command_continues(tmp_path):
    """Before: no "interrupted", eval_id null (the files method stored nothing) and the re-run started over.
    The re-run adds a request time limit (not part of the eval's id) so the slow task ends there."""
    shutil.copytree(DATA / "eval" / "add_tuned", tmp_path / "tasks" / "a_add")
    shutil.copytree(DATA / "newcomer" / "z_slow_task", tmp_path / "tasks" / "z_slow")
    (tmp_path / "pyproject.toml").write_text("")
    command = ["eval", "tasks", "--no-verify", "--target", "v5e"]
    done = interrupt_at(_cli(*command), tmp_path, "files: 1/2 a_add: ")  # z_slow's import sleeps meanwhile
    out, err = done.stdout, done.stderr
    assert done.returncode == 130, out + err
    eid = err.split("; eval ", 1)[1].split()[0]
    assert eid.startswith("eval-"), err
    assert f"pallasite eval: interrupted; eval {eid} keeps 1 task result(s) finished in this run" in err, err
    assert "  files: a_add: compiled" in err and "Run the same command to continue it" in err
    assert "Traceback" not in err
    again = subprocess.run(_cli(*command, "--request-time-limit", "20", "--format", "json", "--output", "eval.json"),
                           cwd=tmp_path, capture_output=True, text=True, timeout=280)
    assert f"resuming {eid}: 1 task results already stored" in again.stderr, again.stderr
    assert "files: 1/2 a_add: compiled" in again.stderr and "(resumed)" in again.stderr
    # --format json --output FILE: the document in FILE, one line on stdout (it printed the text tables)
    assert again.stdout.splitlines() == ["pallasite eval: 1 method(s) over 2 task(s); the JSON document is in "
                                         "eval.json"], again.stdout
    document = json.loads((tmp_path / "eval.json").read_text())
    assert document["eval_id"] == eid
    statuses = {t["task"]: t["status"] for t in document["methods"][0]["per_task"]}
    assert statuses["a_add"].startswith("compiled") and not statuses["z_slow"].startswith("compiled"), statuses

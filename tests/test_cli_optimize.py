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

from pallasite.agents.optimize_record import replay_table

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
    assert [r["verdict"] for r in result["table"]] == ["compile failed", "valid"]
    assert result["best"] == 2 and result["speedup"] > 1 and result["method"] == "estimate (v6e)"
    assert (tmp_path / "add.optimized.py").read_text() == (DATA / "candidates" / "big_blocks.py").read_text()
    exported = subprocess.run(cli("add.py", "--resume", run_id, "--export"), cwd=tmp_path, capture_output=True,
                              text=True, timeout=60)
    assert replay_table(json.loads(exported.stdout)) == result["table"]

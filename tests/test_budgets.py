"""Budgets that hold: `--time-limit` / `agent.maxSeconds` bound the whole run, inside its phases.

A candidate that loops forever when imported used to keep `pallasite optimize` busy far past its
budget (the compile phase ran to the check's own limit, then said "ok: no errors"). Now the phase
is cancelled when the run's budget ends, the worker stopped, and the reason names the limit and
the phase it ended.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

DATA = Path(__file__).parent / "data"
LOOP = "\nwhile True:  # a candidate stuck at import\n    pass\n"


def looping_candidate(tmp_path: Path, settings: str) -> Path:
    """add.py to optimize, and a scripted model whose candidate loops forever when imported."""
    shutil.copy(DATA / "optimize" / "add.py", tmp_path / "add.py")
    (tmp_path / "pyproject.toml").write_text(f"[tool.pallasite]\ntiers = [0, 1]\n{settings}")
    candidate = (DATA / "optimize" / "candidates" / "big_blocks.py").read_text().replace(
        "\n\ndef add_kernel", LOOP + "\n\ndef add_kernel", 1)
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["Use 128-row blocks\nfewer steps.", "```python\n" + candidate + "```"]))
    return replies


def cli(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    return done, time.monotonic() - started


def test_a_candidate_looping_at_import_ends_optimize_within_its_budget(tmp_path):
    # 8 s: less than the looping statement's own share of the import's time, so the run's budget ends first
    replies = looping_candidate(tmp_path, "")
    done, seconds = cli("optimize", "add.py", "--provider", "scripted", "--scripted-file", str(replies),
                        "--max-iterations", "1", "--time-limit", "8", "--format", "json", cwd=tmp_path)
    assert seconds < 8 + 10, seconds
    result = json.loads(done.stdout)
    assert result["stopped"] == "time budget spent (--time-limit 8 s) in the compile phase of iteration 1"
    assert [r["loop_word"] for r in result["table"]] == ["stopped"] and done.returncode == 1


def test_a_candidate_looping_at_import_fails_its_compile_phase_naming_the_statement(tmp_path):
    # 30 s: the looping statement is stopped at its share of the import's time; the phase says where
    replies = looping_candidate(tmp_path, "")
    done, seconds = cli("optimize", "add.py", "--provider", "scripted", "--scripted-file", str(replies),
                        "--iterations", "1", "--max-seconds", "30", "--format", "json", cwd=tmp_path)
    assert seconds < 30 + 10, seconds
    result = json.loads(done.stdout)
    # the limit stopped the check: no error was found, nothing was checked ("not checked", issue 42's words)
    assert [r["loop_word"] for r in result["table"]] == ["not checked"] and done.returncode == 1
    assert "the top-level statement at line 8 was still running" in done.stderr, done.stderr[-2000:]


def test_a_proposal_looping_at_import_ends_fix_within_agent_max_seconds(tmp_path):
    (tmp_path / ".pallasite").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n"
                                             "agent = { maxRounds = 3, maxSeconds = 15, docsPassages = 0 }\n")
    (tmp_path / "kernel.py").write_text((DATA / "agents" / "add_bad_tiling.py").read_text())
    hang = {"explanation": "fix", "edits": [{"search": "BLOCK_COLS = 100\n", "replace": "BLOCK_COLS = 128\n" + LOOP}]}
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([json.dumps(hang)] * 3))
    done, seconds = cli("fix", "kernel.py", "--provider", "scripted", "--scripted-file", str(replies), "--format",
                        "json", cwd=tmp_path)
    result = json.loads(done.stdout)
    assert done.returncode == 1 and not result["ok"]
    # the action's own clock (the original file's check before it, a worker start, is not the action's)
    assert result["seconds"] < 15 + 10, (result["seconds"], seconds)
    # whichever comes first: the run's budget, or the looping statement stopped at its share of the
    # import time, which leaves the proposal not fully checked (never a verified fix)
    assert ("time budget spent (agent.maxSeconds 15 s) in checking round" in result["message"]
            or "could not be fully checked: PLS903" in json.dumps(result)), result["message"]


def test_a_compile_stopped_by_its_limit_is_not_checked_never_ok(tmp_path):
    """The check's own time limit (timeLimit) ends the compile phase: it fails as "not checked"."""
    replies = looping_candidate(tmp_path, "check = { timeLimitS = 5 }\n")
    done, _ = cli("optimize", "add.py", "--provider", "scripted", "--scripted-file", str(replies), "--iterations", "1",
                  "--format", "json", cwd=tmp_path)
    (row,) = json.loads(done.stdout)["table"]
    assert row["loop_word"] == "not checked" and row["compiled"] is None, done.stderr  # never "not compiled for the chip"
    assert "[1] compile: failed: not checked:" in done.stderr
    assert "ok: compiled" not in done.stderr

"""`--apply` never loses the user's text: the result goes over the file only if it is byte-identical to
what the run started from, else beside it with the reason; writes are atomic (server/commands/apply_file.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.server.commands.apply_file import apply_result

DATA = Path(__file__).parent / "data"
RIGHT = json.dumps({"explanation": "128 lanes", "edits": [{"search": "BLOCK_COLS = 100\n", "replace": "BLOCK_COLS = 128\n"}]})


def test_apply_result_writes_over_an_unchanged_file_and_beside_a_changed_one(tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_bytes(b"x = 1\r\n")
    kernel.chmod(0o640)
    done = apply_result(kernel, b"x = 1\r\n", "x = 2\r\n", beside=".fixed.py")
    assert done.applied and kernel.read_bytes() == b"x = 2\r\n" and kernel.stat().st_mode & 0o777 == 0o640
    done = apply_result(kernel, b"x = 1\r\n", "x = 3\n", beside=".fixed.py")
    assert not done.applied and kernel.read_bytes() == b"x = 2\r\n"
    assert done.path == str(tmp_path / "kernel.fixed.py") and (tmp_path / "kernel.fixed.py").read_text() == "x = 3\n"
    assert "changed while the run was going" in done.why
    kernel.unlink()
    done = apply_result(kernel, b"x = 1\r\n", "x = 4\n", beside=".fixed.py")
    assert not done.applied and not kernel.exists() and "could not be read back" in done.why
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kernel.fixed.py"]  # no temporary file left behind


def edit_while_running(argv: list[str], cwd: Path, marker: str, edit) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``argv`` with stderr on a terminal (a pty: progress is printed on a terminal only); once a stderr
    line contains ``marker`` (the model is being asked, its reply delayed), call ``edit()`` (the user typing),
    then let the run finish."""
    import os
    import pty

    main_fd, term_fd = pty.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=term_fd, text=True)
    os.close(term_fd)
    seen, err = [], ""
    try:
        with open(main_fd, "r", errors="replace", closefd=True) as stderr:
            try:
                for line in stderr:
                    seen.append(line)
                    if marker in line:
                        edit()
                        break
                out, _ = proc.communicate(timeout=240)
                err = stderr.read()
            except OSError:  # EIO: the run ended and closed the terminal
                out, _ = proc.communicate(timeout=240)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(argv, proc.returncode, out, "".join(seen) + err), seen


def test_fix_apply_keeps_an_edit_made_during_the_run(tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text((DATA / "agents" / "add_bad_tiling.py").read_text())
    (tmp_path / ".pallasite").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0]\nagent = { docsPassages = 0 }\n")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"text": RIGHT, "delay_s": 3}]))
    mine = kernel.read_text() + "\n# the user's edit, made while the fix ran\n"
    done, seen = edit_while_running(
        [sys.executable, "-m", "pallasite.server.cli", "fix", "kernel.py", "--provider", "scripted",
         "--scripted-file", str(replies), "--apply"], tmp_path, "asking scripted", lambda: kernel.write_text(mine))
    assert any("asking scripted" in line for line in seen), done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert kernel.read_text() == mine
    fixed = tmp_path / "kernel.fixed.py"
    assert "BLOCK_COLS = 128" in fixed.read_text() and "the user's edit" not in fixed.read_text()
    assert "written to kernel.fixed.py: kernel.py changed while the run was going" in done.stdout


@pytest.mark.pipeline
def test_optimize_apply_keeps_an_edit_made_during_the_run(tmp_path):
    add = tmp_path / "add.py"
    add.write_text((DATA / "optimize" / "add.py").read_text())
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"text": "Use 128-row blocks\nfewer steps.", "delay_s": 3},
                                   "```python\n" + (DATA / "optimize" / "candidates" / "big_blocks.py").read_text() + "```"]))
    mine = add.read_text() + "\n# the user's edit, made while optimize ran\n"
    done, _ = edit_while_running(
        [sys.executable, "-m", "pallasite.server.cli", "optimize", "add.py", "--provider", "scripted",
         "--scripted-file", str(replies), "--iterations", "1", "--apply", "--format", "json"], tmp_path,
        "[1] plan: planning", lambda: add.write_text(mine))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert add.read_text() == mine
    assert result["written"] == "add.optimized.py" and "changed while the run was going" in result["not_applied_why"]
    assert (tmp_path / "add.optimized.py").read_text() == (DATA / "optimize" / "candidates" / "big_blocks.py").read_text()

"""Small things a newcomer met on the command line (issue 52), each through the real command."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"


def _cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_results_folder_ignores_itself_in_git(tmp_path):
    """Before: a check in a git checkout (what the pre-commit hook runs) left `.pallasite/` untracked."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    shutil.copy(ROOT / "examples" / "add.py", tmp_path / "add.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    done = _cli(tmp_path, "check", "add.py")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / ".pallasite" / "results.sqlite").is_file()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout
    assert ".pallasite" not in status and "add.py" in status, status

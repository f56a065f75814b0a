"""A bad ``[tool.pallasite]`` stops a command with exit 2 (issue 52): before, `target = "v7"`, broken
TOML or `tiers = [0,1,2,7]` printed a warning, checked for v6e with the default tiers and exited 0,
so CI passed on a configuration nobody wrote. The message names the file, the key and what it takes.
The language server keeps showing the problem and using the default (its text is unchanged)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.server.settings import load_project_settings, read_project

EXAMPLES = Path(__file__).parent.parent / "examples"

BAD = [
    ('target = "v7"', "invalid value 'v7' for 'target' (expected one of v4, v5e, v5p, v6e, 7x)"),
    ("tiers = [0, 1, 2, 7]", "invalid value [0, 1, 2, 7] for 'tiers' (expected a list of tiers from 0, 1, 2, 3)"),
    ('target = "v5e', "cannot read it as TOML"),
    ('tagret = "v5e"', "unknown setting 'tagret'; did you mean 'target'?"),
    ("check = 3", "setting 'check' must be a table, got 3"),
]


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("line, said", BAD, ids=[b[0] for b in BAD])
def test_check_exits_2_naming_the_file_the_key_and_what_it_takes(tmp_path, line, said):
    shutil.copy(EXAMPLES / "add.py", tmp_path / "add.py")
    (tmp_path / "pyproject.toml").write_text(f"[tool.pallasite]\n{line}\n")
    done = _cli(tmp_path, "check", "add.py", "--tiers", "0")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # nothing was checked
    (error,) = done.stderr.splitlines()
    assert error.startswith(f"error: {tmp_path / 'pyproject.toml'}") and said in error, error
    assert "pallasite settings --schema" in error


@pytest.mark.parametrize("command", [["time", "add.py", "--backend", "estimate"], ["tune", "add.py"],
                                     ["fix", "add.py", "--provider", "scripted", "--scripted-file", "r.json"],
                                     ["eval", "."]])
def test_every_command_stops_at_it(tmp_path, command):
    shutil.copy(EXAMPLES / "add.py", tmp_path / "add.py")
    (tmp_path / "r.json").write_text("[]")
    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v7"\n')
    done = _cli(tmp_path, *command)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "invalid value 'v7' for 'target'" in done.stderr.splitlines()[-1], done.stderr
    assert "Traceback" not in done.stderr


def test_the_readme_configuration_is_valid_and_a_user_only_key_is_a_note(tmp_path):
    shutil.copy(EXAMPLES / "add.py", tmp_path / "add.py")
    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v5e"\ntiers = [0, 1, 2]\n'
                                             'severity = { PLS006 = "warning" }\nagent = { provider = "gemini" }\n')
    done = _cli(tmp_path, "check", "add.py", "--tiers", "0")
    assert done.returncode == 0, done.stderr
    assert "warning: settings:" in done.stderr and "'agent.provider' ignored" in done.stderr


def test_the_editor_still_gets_a_warning_and_the_default(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v7"\n')
    settings, warnings = load_project_settings(tmp_path)
    assert settings.target == "v6e"
    assert warnings == [f"{tmp_path / 'pyproject.toml'} [tool.pallasite]: invalid value 'v7' for 'target' (expected "
                        "one of v4, v5e, v5p, v6e, 7x); using the default 'v6e'."]
    assert read_project(tmp_path).problems[0].editor == warnings[0]

"""`eval --task-budget N` with the default method (files) redid the same N tasks on every run ("continue
eval None": nothing stores the files method's rows, so nothing resumes). It is refused with the reason."""

from __future__ import annotations

import shutil
from pathlib import Path

from pallasite.server.cli import main

DATA = Path(__file__).parent / "data"


def test_a_task_budget_without_a_resumable_method_is_refused(tmp_path, capsys):
    shutil.copytree(DATA / "eval", tmp_path / "eval")
    assert main(["eval", str(tmp_path / "eval"), "--task-budget", "1", "--no-verify"]) == 2
    err = capsys.readouterr().err
    assert "--task-budget" in err and "start over every time" in err and "continue eval None" not in err

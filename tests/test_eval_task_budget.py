"""`eval --task-budget N` with the default method (files) redid the same N tasks on every run ("continue
eval None": nothing stored the files method's rows, so nothing resumed); then it was refused. Now every
method's finished tasks are stored under the eval's id, so a bounded files eval continues where it stopped."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pallasite.server.cli import main

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

DATA = Path(__file__).parent / "data"


def test_a_task_budget_with_the_files_method_stops_and_the_same_command_continues(tmp_path, capsys, monkeypatch):
    shutil.copytree(DATA / "eval", tmp_path / "eval")
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "eval", "--task-budget", "1", "--no-verify"]) == 3
    err = capsys.readouterr().err
    eid = err.split("; eval ", 1)[1].split()[0]
    assert "--task-budget 1 reached" in err and f"run the same command again to continue eval {eid}" in err, err
    assert main(["eval", "eval", "--task-budget", "1", "--no-verify"]) == 0
    out, err = capsys.readouterr()
    assert f"resuming {eid}: 1 task results already stored" in err and "(resumed)" in err, err
    assert f"eval {eid}" in out and "replay" not in out  # no model answered: nothing to replay


def test_a_rerun_with_a_larger_memory_limit_is_a_new_eval(tmp_path, capsys, monkeypatch):
    """JAXBench 8p at the default 4096 MiB is 'not verified: the worker went over its memory limit'; the hint says
    to raise --memory-mb, and the re-run with 12288 resumed the stored failure ('(resumed)'). Failed before."""
    shutil.copytree(DATA / "eval", tmp_path / "eval")
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "eval", "--task-budget", "1", "--no-verify"]) == 3
    first = capsys.readouterr().err.split("; eval ", 1)[1].split()[0]
    assert main(["eval", "eval", "--task-budget", "1", "--no-verify", "--memory-mb", "6144"]) == 3
    err = capsys.readouterr().err
    assert "resuming" not in err and first not in err, err

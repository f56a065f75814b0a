"""`pallasite time/profile --backend estimate`: listed in their help and the README, then refused; now
the cost model's figures for --target, labelled as an estimate, nothing run on a device."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture
def kernel(tmp_path) -> Path:
    shutil.copy(ROOT / "examples" / "add.py", tmp_path / "add.py")
    (tmp_path / ".pallasite").mkdir()
    return tmp_path / "add.py"


@pytest.mark.pipeline
def test_time_backend_estimate_prices_the_kernel_and_its_reference(kernel):
    done = _run(kernel.parent, "time", "add.py", "--backend", "estimate", "--target", "v5e", "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads(done.stdout)
    assert data["backend"] == "estimate" and data["target"] == "v5e"
    assert data["label"].startswith("estimate (") and data["label"].endswith(", v5e)")
    assert data["kernel_s"] > 0 and data["reference_s"] > 0 and data["speedup"] > 0


def test_profile_backend_estimate_says_nothing_ran_on_a_device(kernel):
    done = _run(kernel.parent, "profile", "add.py", "--backend", "estimate", "--target", "v6e")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "estimate (" in done.stdout and "nothing ran on a device" in done.stdout and "speedup" in done.stdout


def test_time_takes_one_host(kernel):
    done = _run(kernel.parent, "time", "add.py", "--backend", "ssh", "--host", "a", "--host", "b")
    assert done.returncode == 2 and "runs on one host" in done.stderr


def test_time_takes_a_kernel_file_against_a_task_as_eval_spells_it(tmp_path, capsys):
    """`time TASK_DIR --kernel FILE` (eval's spelling) and the old `time FILE --task TASK_DIR` (a note)
    give the same files to time."""
    import argparse

    from pallasite.server.commands import cmd_time

    task = ROOT / "tests" / "data" / "timing" / "ladder" / "attention"
    kernel = tmp_path / "k.py"
    kernel.write_text((task / "optimized.py").read_text())
    new = cmd_time._files(argparse.Namespace(command="time", task=str(task), kernel=str(kernel), against=None))
    old = cmd_time._files(argparse.Namespace(command="time", task=str(kernel), kernel=None, against=str(task)))
    assert new == old and new.path == str(kernel) and new.reference_path.endswith("baseline.py")
    assert "deprecated" in capsys.readouterr().err

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


@pytest.mark.parametrize("command, does", [
    ("tune", "pallasite tune tunes a Pallas kernel's block sizes"),
    ("time", "pallasite time times a Pallas kernel against its reference"),
    ("profile", "pallasite profile profiles a Pallas kernel against its reference"),
])
def test_a_file_without_pallas_gets_one_line_and_exit_2(tmp_path, command, does):
    """Before: `tune plain.py` exited 1 with "TaskError: no task None in plain.py (tasks: none)"; `time
    plain.py` started a worker and recommended `time FILE --task TASK_DIR`, the form the README deprecates."""
    shutil.copy(DATA / "cli" / "plain.py", tmp_path / "plain.py")
    done = _cli(tmp_path, command, "plain.py")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: ") and "plain.py: not a Pallas kernel" in line and line.endswith(does), line


def test_a_kernel_without_a_task_is_never_told_the_deprecated_form(tmp_path):
    (tmp_path / "k.py").write_text("from jax.experimental import pallas as pl\n")
    done = _cli(tmp_path, "time", "k.py")
    said = done.stdout + done.stderr
    assert done.returncode == 2, said
    assert "k.py" in said and "task" in said, said  # says what is missing
    assert "--task TASK_DIR" not in said and "FILE --task" not in said, said


@pytest.mark.parametrize("flag, said", [("--runs", "--runs -1: give the number of timed runs (1 or more)"),
                                        ("--warmup", "--warmup -1: give the number of untimed calls (0 or more)")])
def test_negative_counts_are_refused(tmp_path, flag, said):
    """Before: `--runs -1` was accepted and sent to the worker."""
    shutil.copy(ROOT / "examples" / "add.py", tmp_path / "add.py")
    done = _cli(tmp_path, "time", "add.py", flag, "-1")
    assert done.returncode == 2 and done.stderr.splitlines() == [f"error: {said}"], done.stderr


def test_eval_of_a_file_says_it_takes_a_folder_of_tasks(tmp_path):
    """Before: "add.py: no such folder" for a file that exists."""
    shutil.copy(ROOT / "examples" / "add.py", tmp_path / "add.py")
    done = _cli(tmp_path, "eval", "add.py")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert "add.py: a file; pallasite eval takes a folder of tasks" in line and "no such folder" not in line
    assert "`pallasite time FILE`" in line and "`pallasite eval TASK_DIR --kernel FILE`" in line


def test_a_launcher_is_named_by_its_host_and_a_failed_ssh_says_what_to_try():
    from pallasite.engine.workers.launcher import launch_failure, launcher_host
    from pallasite.engine.workers.remote import BackendSettings, where

    assert launcher_host(["ssh", "-p", "2222", "-o", "BatchMode=yes", "me@vm", "{worker}"]) == "me@vm"
    assert launcher_host(["ssh", "-i", "k", "-4", "vm"]) == "vm"
    assert launcher_host(["gcloud", "compute", "tpus", "tpu-vm", "ssh", "my-tpu", "--zone", "z",
                          "--command", "{worker}"]) == "my-tpu"
    assert launcher_host(["./run-remote.sh"]) is None
    # before: ssh:ssh (the launcher's program name)
    assert where(BackendSettings(kind="ssh", command="ssh -p 2222 me@vm {worker}")) == "ssh:me@vm"
    assert where(BackendSettings(kind="ssh", command="./run-remote.sh")) == "ssh:./run-remote.sh"
    said = launch_failure(["ssh", "-p", "1", "me@vm", "{worker}"], 255,
                          "ssh: connect to host vm port 1: Connection refused\n")
    assert said == ("ssh could not reach me@vm or log in (exit 255) (ssh: connect to host vm port 1: Connection "
                    "refused); check the host, the port and the key, and test the connection alone: "
                    "ssh -p 1 me@vm true")
    assert launch_failure(["./run-remote.sh"], 3, "no such host\n") == "the launcher said: no such host"


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs an ssh client")
def test_ssh_to_a_closed_port_says_the_host_could_not_be_reached(tmp_path):
    """Before: "the worker exited with code 255", and the worker labelled ssh:ssh."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    shutil.copy(ROOT / "examples" / "add.py", tmp_path / "add.py")
    launcher = f"ssh -p {port} -o BatchMode=yes -o StrictHostKeyChecking=no nobody@127.0.0.1 {{worker}}"
    done = _cli(tmp_path, "time", "add.py", "--backend", "ssh", "--ssh-command", launcher)
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "time on ssh:nobody@127.0.0.1" in said, said
    assert "ssh could not reach nobody@127.0.0.1 or log in (exit 255)" in said and "Connection refused" in said
    assert f"test the connection alone: ssh -p {port} -o BatchMode=yes" in said and "nobody@127.0.0.1 true" in said


def test_tune_does_not_propose_the_chips_geometry_or_a_bound():
    """Before: NUM_LANES, NUM_SUBLANES and MIN_BLOCK_SIZE were proposed as tunables beside BLOCK_ROWS."""
    from pallasite.analysis.source import Source
    from pallasite.analysis.tunables import find_tunables, hardware_constant

    path = DATA / "newcomer" / "hardware_constants.py"
    source = Source(path.read_text())
    assert [t.name for t in find_tunables(source, str(path))] == ["BLOCK_ROWS"]
    declared = find_tunables(source, str(path), declared={"NUM_SUBLANES": [8, 16]})  # the user's own choice
    assert sorted(t.name for t in declared) == ["BLOCK_ROWS", "NUM_SUBLANES"]
    assert [n for n in ("NUM_LANES", "num_sublanes", "MXU_SIZE", "MIN_BLOCK_SIZE", "MAX_ROWS", "LANE",
                        "BLOCK_ROWS", "BLOCK_K", "MINOR_TILE", "TILE_MAX") if hardware_constant(n)] == [
        "NUM_LANES", "num_sublanes", "MXU_SIZE", "MIN_BLOCK_SIZE", "MAX_ROWS", "LANE"]


def test_a_search_row_without_a_candidate_says_why(tmp_path):
    """Before: the row read "no candidate" beside the strategy, and the closing error "no candidate: no
    candidate: ..."."""
    import json

    shutil.copy(ROOT / "examples" / "add.py", tmp_path / "add.py")
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    (tmp_path / "r.json").write_text(json.dumps(["Bigger blocks\nbecause.", "Bigger blocks would help; no code."]))
    done = _cli(tmp_path, "search", "add.py", "--provider", "scripted", "--scripted-file", "r.json", "--max-nodes",
                "1", "--jobs", "1", timeout=280)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    row = next(i for i, line in enumerate(lines) if " no candidate " in line and not line.strip().startswith("b1.0.0:"))
    assert lines[row + 1].split() == "why: the implementer's reply held no Python source block".split(), lines[row:]
    assert "no candidate: no candidate" not in done.stderr


@pytest.mark.slow  # about 10 s (the worker is killed while it imports the file)
def test_a_worker_over_its_memory_limit_says_which_flag_raises_it(tmp_path):
    """Before: JAXBench's 8p GEMM at the default 4096 MiB said only "the worker went over its memory limit",
    exit 2; `--memory-mb 8192` worked. Here the same at 1024 MiB. Inputs too big for interpret mode are now
    refused before they are made ("not checked ... give the file smaller example inputs"), so the limit is met
    by what no budget sees: examples/add.py with 1.25 GiB of float64 made when the file is imported."""
    text = (ROOT / "examples" / "add.py").read_text()
    (tmp_path / "big_add.py").write_text(text + "\n\nimport numpy as _np\n\n_TABLE = _np.ones((160, 1 << 20))\n")
    done = _cli(tmp_path, "time", "big_add.py", "--memory-mb", "1024", "--no-store", timeout=280)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "went over its memory limit of 1024 MiB" in done.stdout + done.stderr
    hint = done.stderr.splitlines()[-1]
    assert hint.startswith("hint: pallasite time needed more than the worker's 1024 MiB"), done.stderr
    assert "rerun with --memory-mb 2048 (or set check.memoryMb = 2048 in [tool.pallasite])" in hint, hint


def test_the_reuse_note_names_the_current_flag():
    """Before: every check that reused a stored tier-2 verdict said "--no-cache recompiles", the old spelling."""
    from pallasite.engine.result_cache import CachedVerdict, reuse_note

    note = reuse_note("add", CachedVerdict("ok", (), 0.0, ".pallasite/results.sqlite"), "v6e", {"jax": "0.10.2"})
    assert "`pallasite check --no-store` recompiles" in note and "--no-cache" not in note, note

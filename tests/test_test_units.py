"""The README's test command sends each test file whole to one test process (tests/conftest.py).

With pytest 9.2 and pytest-xdist 3.8, xdist's own grouping no longer held (it renames ``item._nodeid``,
which pytest stopped reading): every test of a file went out on its own, so a file's module-scoped warm
workers and judged candidates were made on both processes, and again each time two files interleaved on
one (tier 3's places: its 90-s module fixture twice). This runs the same command over a toy suite that uses
the project's conftest and counts the module fixtures' set-ups.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is not installed (the dev extra)")

TOY = '''
import os
import pytest

@pytest.fixture(scope="module")
def made_once():
    with open(os.environ["UNITS_LOG"], "a") as log:
        log.write(f"{__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.parametrize("i", range(8))
def test_one(made_once, i):
    pass
'''


def test_each_file_runs_whole_on_one_process_and_the_ray_files_together(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(Path(__file__).parent / "conftest.py", tests / "conftest.py")
    names = ["test_a", "test_b", "test_c", "test_ray_backend", "test_search_ray"]
    for name in names:
        (tests / f"{name}.py").write_text(TOY)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    log = tmp_path / "units.log"
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
                           "no:cacheprovider"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "UNITS_LOG": str(log)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    setups = [line.split() for line in log.read_text().splitlines()]
    assert sorted(module for module, _ in setups) == sorted(names), setups  # each module's fixture made once
    workers = dict(setups)
    assert workers["test_ray_backend"] == workers["test_search_ray"], setups  # one process, one Ray cluster

"""The shipped examples/: tier 0 says exactly what each file's top comment promises, every
example is a task by the native convention, and (slow) each runs as plain python on CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.analysis.tier0 import analyze

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# file -> the tier-0 codes it must produce (the examples' top comments say why)
EXPECTED = {
    "add.py": [],
    "matmul.py": [],
    "bad_tiling.py": ["PLS001"],
    "bad_index_map.py": ["PLS002"],
    "bad_semantics.py": ["PLS004"],
    "bad_reshape.py": [],  # only the TPU compiler (tier 2) catches it
}


def test_every_example_is_listed():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_tier0_verdict(name):
    path = EXAMPLES / name
    result = analyze(path.read_text(), str(path))
    assert result.syntax_ok and result.uses_pallas and len(result.sites) == 1
    assert [f.code for f in result.findings] == EXPECTED[name]
    (task,) = result.tasks
    assert task.inputs == "example_inputs" and task.reference == "reference"
    for finding in result.findings:
        assert finding.code in path.read_text().split('"""')[1]  # the top comment names the code


def test_matmul_example_tunables():
    path = EXAMPLES / "matmul.py"
    (task,) = analyze(path.read_text(), str(path)).tasks
    assert [(t.name, t.default, t.candidates) for t in task.tunables] == [
        ("bm", 256, (128, 256, 512)), ("bn", 256, (128, 256, 512)), ("bk", 512, (256, 512, 1024))]


def test_fixes_offered_for_example_mistakes():
    for name, expected in (("bad_tiling.py", "256"), ("bad_semantics.py", '("parallel", "parallel", "arbitrary")')):
        (finding,) = analyze((EXAMPLES / name).read_text()).findings
        assert finding.fix is not None and finding.fix.edits[0].new_text == expected


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_as_plain_python(name):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, env=env, timeout=300)
    output = proc.stdout + proc.stderr
    if name == "bad_index_map.py":
        assert proc.returncode != 0 and "fails as expected" in output
    else:
        assert proc.returncode == 0, output[-2000:]
        assert name.removesuffix(".py") in proc.stdout

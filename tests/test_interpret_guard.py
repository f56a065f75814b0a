"""Interpret mode is not a fix: a confined worker refuses model-written pallas_calls that ask for it.

Decided from what the worker traced (runner/tier3/interpret_guard.py), so every spelling is caught: the
keyword's value changed, a default changed, ``**{"interpret": True}``, ``functools.partial``. Each
fixture hides a real lowering error (a 100-lane block) that interpret mode would let "compile".
The user's own checks are unchanged; the fixer and optimize refuse such candidates end to end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.engine.workers import spawn
from pallasite.engine.checker import CheckOptions, Checker
from pallasite.engine.workers.client import WorkerClient, WorkerConfig
from pallasite.engine.timing import TaskFiles, time_request

DATA = Path(__file__).parent / "data"
UNTRUSTED = DATA / "untrusted"
FORMS = ("interpret_keyword", "interpret_default", "interpret_kwargs", "interpret_partial")

pytestmark = pytest.mark.skipif(spawn.confinement_problem(sys.executable) is not None,
                                reason=f"no confined worker here: {spawn.confinement_problem(sys.executable)}")


def call_line(path: Path) -> int:
    """0-based line of the call that makes the pallas_call (``pl.pallas_call(`` or ``call(``)."""
    lines = path.read_text().splitlines()
    return next(i for i, line in enumerate(lines) if "return pl.pallas_call(" in line or "return call(" in line)


@pytest.mark.pipeline
async def test_every_form_of_interpret_is_an_error_in_a_confined_check():
    checker = Checker(CheckOptions(tiers=(0, 1), time_limit_s=120), untrusted=True)
    try:
        for name in FORMS:
            path = UNTRUSTED / f"{name}.py"
            report = await checker.check(str(path), path.read_text())
            found = [f for f in report.findings if f.code == "PLS114"]
            assert found, (name, [(f.code, f.message) for f in report.findings])
            assert found[0].severity == "error" and found[0].span.line == call_line(path), (name, found[0].span)
            assert "interpret mode" in found[0].message and found[0].tier == 1
            # "compiled" is not claimed: tier 1 is an error for the kernel the entry reaches, ok for none
            states = [dict(v.tiers).get(1) for v in report.kernels]
            assert "error" in states and "ok" not in states, (name, report.kernels)
        user = UNTRUSTED / "interpret_off.py"  # interpret=interpret, False: lowered, and its real error found
        report = await checker.check(str(user), user.read_text())
        assert not [f for f in report.findings if f.code == "PLS114"]
        assert any(f.code in ("PLS001", "PLS101") for f in report.findings)
    finally:
        await checker.close()


async def test_the_users_own_checks_are_unchanged():
    checker = Checker(CheckOptions(tiers=(0, 1), time_limit_s=120))
    try:
        path = UNTRUSTED / "interpret_default.py"
        report = await checker.check(str(path), path.read_text())
        assert not [f for f in report.findings if f.code == "PLS114"]
    finally:
        await checker.close()


async def test_the_judge_rejects_a_kernel_run_in_interpret_mode_from_its_module():
    """A candidate passing interpret=True in a ** dict (tier 0 cannot read it): the judge reads its exported
    program, whose TPU branch has no Mosaic kernel, and says interpret mode may be why (the user's file, the
    same kernel without the flag, is the trusted side)."""
    path = UNTRUSTED / "interpret_kwargs.py"
    text = path.read_text()
    params = time_request(TaskFiles(str(path)), "time", runs=1, warmup=0, text=text,
                          trusted=(str(path), text.replace('**{"interpret": True}', "")))
    async with WorkerClient(WorkerConfig(confine=True, timeout_s=120)) as worker:
        reply = await worker.request(params)
    assert reply.ok, reply.why
    assert reply.result.verdict == "rejected"
    (trick, *_) = reply.result.rejections
    assert trick.trick == "no_pallas_call" and "interpret mode" in trick.message


def run_cli(command: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", command, *args], capture_output=True,
                          text=True, cwd=cwd, timeout=240)


@pytest.mark.pipeline
def test_a_fix_that_switches_to_interpret_mode_is_refused(tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text((UNTRUSTED / "interpret_off.py").read_text())
    (tmp_path / ".pallasite").mkdir()
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\nagent = { maxRounds = 2, "
                                             "docsPassages = 0 }\n")
    silence = {"explanation": "run it in interpret mode",
               "edits": [{"search": "interpret=interpret)(x, y)", "replace": "interpret=True)(x, y)"}]}
    default = {"explanation": "default to interpret mode",
               "edits": [{"search": "interpret: bool = False", "replace": "interpret: bool = True"}]}
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([json.dumps(silence), json.dumps(default)]))
    before = kernel.read_text()
    done = run_cli("fix", "kernel.py", "--provider", "scripted", "--scripted-file", str(replies), "--format", "json",
                   "--apply", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert [a["verdict"] for a in result["attempts"]] == ["still failing", "still failing"]
    assert all("PLS114" in a["detail"] for a in result["attempts"])
    assert not result["ok"] and kernel.read_text() == before


@pytest.mark.pipeline
def test_an_optimize_candidate_in_interpret_mode_never_wins(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.pallasite]\ntiers = [0, 1]\n")
    original = (DATA / "optimize" / "add.py").read_text()
    (tmp_path / "add.py").write_text(original)
    candidate = original.replace("def add(x, y):", "def add(x, y, interpret=True):").replace(
        "out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),", "out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
        "        interpret=interpret,").replace("(8, x.shape[1])", "(128, x.shape[1])").replace("// 8", "// 128")
    assert candidate.count("interpret=interpret") == 1
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["Bigger blocks\nfewer steps.", "```python\n" + candidate + "```"]))
    done = run_cli("optimize", "add.py", "--provider", "scripted", "--scripted-file", str(replies), "--iterations",
                   "1", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    (row,) = json.loads(done.stdout)["table"]
    assert row["loop_word"] == "not compiled" and not row["speedup"]
    assert "PLS114" in done.stderr
    assert not (tmp_path / "add.optimized.py").exists()

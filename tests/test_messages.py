"""Messages a newcomer can act on (issue 37): every error the command line prints starts with
"error:"; `check` names the kernels a task never calls and `--strict` passes a file whose every
called kernel passed; `eval` with one method prints each task's result; counts agree with their
nouns; `tune --apply` says the values it changed, not every tunable."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pallasite.analysis.types import FileReport, KernelVerdict, Span
from pallasite.engine.findings.reach import NOT_REACHED
from pallasite.server.reports import report_format
from pallasite.server.cli import main

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("argv", [
    ["check", "no_such_file.py"],
    ["check", "--tiers"],  # a usage error, said by argparse
    ["fix", "no_such_file.py"],
    ["optimize", "no_such_file.py"],
    ["search", "no_such_file.py"],
    ["tune", "no_such_file.py"],
    ["time", "no_such_file.py"],
    ["eval", "no_such_folder"],
    ["settings", "no_such_folder"],
    ["serve", "--port", "70000"],
    ["docs", "search", "x", "-k", "0"],
])
def test_every_error_line_starts_with_error(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2, (argv, code)
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if line and not line.startswith(("usage:", " ", "pallasite: note"))]
    assert said and said[-1].startswith("error: "), err


def _kernel(name: str, tier1: str) -> KernelVerdict:
    return KernelVerdict(name, Span.point(0), ((0, "ok"), (1, tier1)))


def test_strict_passes_a_file_whose_every_called_kernel_passed():
    report = FileReport("task.py", kernels=(_kernel("fwd", "ok"), _kernel("bwd", NOT_REACHED)))
    assert report_format.not_checked(report, (0, 1)) == []
    assert report_format.exit_status([report], (0, 1), strict=True) == 0
    lines = report_format.file_lines(report, tiers=(0, 1), verbose=True)
    assert "task.py: note: the task never calls bwd: tier 0 only checked it" in lines


def test_a_reason_names_the_kernels_it_is_about():
    nothing_called = FileReport("task.py", kernels=(_kernel("a", NOT_REACHED), _kernel("b", NOT_REACHED)))
    assert report_format.not_checked(nothing_called, (0, 1)) == [f"tier 1 {NOT_REACHED} (kernels a, b)"]
    skipped = FileReport("k.py", kernels=(_kernel("add", "skipped: no example inputs (PLS900)"),))
    assert report_format.not_checked(skipped, (0, 1)) == ["tier 1 skipped: no example inputs (PLS900) (kernel add)"]


def test_check_strict_on_a_forward_only_task(capsys, tmp_path, monkeypatch):
    """Before: "not fully checked: tier 1 not reached: the task never calls this kernel" without a name,
    and --strict exited 1 although the forward kernel, the only one the task calls, passed."""
    path = tmp_path / "forward_only_task.py"
    shutil.copy(DATA / "honest" / "forward_only_task.py", path)
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(path), "--tiers", "0,1", "--strict", "--no-store", "-v"]) == 0
    out = capsys.readouterr().out
    assert "note: the task never calls scale_bwd_x_kernel, scale_bwd_w_kernel: tier 0 only checked them" in out


def test_eval_with_one_method_prints_each_task(tmp_path, monkeypatch, capsys):
    shutil.copytree(DATA / "eval" / "scale_reference_only", tmp_path / "tasks" / "scale_reference_only")
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "tasks", "--method", "reference", "--no-verify"]) == 0
    out = capsys.readouterr().out
    # the reference method answers with the reference itself: every task "no candidate", the floor
    # (docs/search-eval.md); the per-task table prints the status in full (it was shortened to "none")
    assert any(line.split() == ["scale_reference_only", "no", "candidate"] for line in out.splitlines()), out
    assert "0 with a candidate" in out, out
    assert main(["eval", "tasks", "--method", "reference", "--no-verify", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["version"] == 3 and document["methods"][0]["per_task"][0]["task"] == "scale_reference_only"


def test_counts_agree_with_their_nouns():
    from pallasite.agents.eval_agents import AgentSpec
    from pallasite.agents.llm.providers_scripted import _were_used

    assert AgentSpec("auto", iterations=1).label() == "auto, 1 iteration"
    assert AgentSpec("auto", iterations=5).label() == "auto, 5 iterations"
    assert (_were_used(1), _were_used(2)) == ("1 was used", "2 were used")

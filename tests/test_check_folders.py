"""`pallasite check` on a folder as users have them: Pallas kernels next to plain-JAX files, results
printed as files finish with a progress line, and one place for the results store outside a project.

tests/data/folders/tasks/ holds a JAXBench-style task (a Pallas ``optimized.py`` beside its plain-JAX
``baseline.py``) and a guide-style kernel beside a helper without Pallas.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

from pallasite.analysis.types import FileReport, Finding, KernelVerdict, Span
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths_sync
from fake_backend import FakeStep, fake_backend
from pallasite.engine.store_cache import workspace_for
from pallasite.server.reports import report_format
from pallasite.server.commands.check_progress import CheckProgress

TASKS = Path(__file__).parent / "data" / "folders" / "tasks"


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pallasite.server.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_files_without_pallas_are_skipped_quietly_and_strict_passes(tmp_path):
    """Before: baseline.py (plain JAX, a JAXBench task) read "tier 0 not run" and --strict failed it."""
    shutil.copytree(TASKS, tmp_path / "tasks")
    proc = run_cli("check", "tasks", "--tiers", "0,1", "--strict", "--no-cache", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    files = {Path(f["path"]).name: f for f in doc["files"]}
    assert [f["path"] for f in doc["files"]] == sorted(f["path"] for f in doc["files"])  # path order
    assert {name for name, f in files.items() if f["skipped"]} == {"baseline.py", "plot.py"}
    assert all(f["not_fully_checked"] == [] and f["findings"] == [] for f in files.values())
    assert {name: f["tiers_ran"] for name, f in files.items() if not f["skipped"]} == {
        "optimized.py": [0, 1], "kernel.py": [0, 1]}
    assert doc["summary"]["skipped"] == 2 and doc["summary"]["wall_s"] > 0
    text = run_cli("check", "tasks", "--tiers", "0", "--strict", "--no-cache", cwd=tmp_path)
    assert text.returncode == 0
    assert text.stdout.splitlines()[-1].startswith("2 file(s) checked for v6e, tiers 0 in ")
    assert text.stdout.splitlines()[-1].endswith("; 2 file(s) without Pallas skipped")


def _report(name: str, error: bool = False) -> FileReport:
    finding = Finding(code="PLS001", message="bad block", span=Span.point(3), severity="error", tier=0,
                      origin="pallasite rules") if error else None
    return FileReport(path=name, findings=(finding,) if finding else (),
                      kernels=(KernelVerdict(name="k", span=Span.point(3), tiers=((0, "ok"),)),))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_results_print_in_path_order_as_soon_as_every_earlier_file_finished_and_the_bar_only_on_a_terminal():
    """Before: each file printed as it finished, so a folder checked on several workers printed its files in a
    different order each run."""
    out, quiet = io.StringIO(), io.StringIO()
    progress = CheckProgress(["a.py", "b.py", "c.py"], tiers=(0,), out=out, bar=quiet)
    progress(_report("b.py", error=True))  # finishing order: b, c, a
    assert out.getvalue() == ""  # held until a.py is done
    progress(_report("c.py"))
    progress(_report("a.py", error=True))
    printed = [line.split(":")[0] for line in out.getvalue().splitlines() if not line.startswith(" ")]
    assert printed == ["a.py", "b.py"]  # clean files print nothing; the others in path order
    progress.close()
    assert quiet.getvalue() == ""  # not a terminal: no progress line
    assert [Path(r.path).name for r in progress.done] == ["b.py", "c.py", "a.py"]

    out, terminal = io.StringIO(), _Terminal()
    progress = CheckProgress(["a.py", "b.py", "c.py"], tiers=(0,), out=out, bar=terminal)
    progress(_report("b.py", error=True))
    assert "1/3" in terminal.getvalue() and "b.py" in terminal.getvalue()
    progress.close()  # a.py never finished (an interrupted check): b.py's result is still shown
    assert out.getvalue().startswith("b.py:4:1: error[PLS001]")


def test_the_engine_hands_over_each_report_as_its_file_finishes_and_returns_them_in_path_order(tmp_path):
    for name in ("a.py", "b.py", "c.py"):
        shutil.copy(TASKS / "scale" / "kernel.py", tmp_path / name)
    delays = {"a.py": 0.6, "b.py": 0.0, "c.py": 0.3}

    def script(params, purpose):
        return FakeStep(delay_s=delays[Path(params.source.path).name])

    finished: list[str] = []
    reports = check_paths_sync([str(tmp_path / n) for n in ("a.py", "b.py", "c.py")], CheckOptions(tiers=(0, 1)),
                               jobs=3, use_store=False, on_report=lambda r: finished.append(Path(r.path).name),
                               backend_factory=lambda config, checks: fake_backend(script, {"check": checks}))
    assert finished == ["b.py", "c.py", "a.py"]
    assert [Path(r.path).name for r in reports] == ["a.py", "b.py", "c.py"]


def test_outside_a_project_the_store_is_where_the_command_ran_and_store_finds_it(tmp_path):
    """Before: the store went to the first file's folder (tasks/add/.pallasite) and `pallasite store`
    run where `check` was run found nothing."""
    shutil.copytree(TASKS, tmp_path / "tasks")
    assert workspace_for([tmp_path / "tasks" / "add" / "optimized.py"], cwd=tmp_path) == tmp_path
    (tmp_path / "tasks" / "pyproject.toml").write_text("")  # inside a project: the project, wherever it ran from
    assert workspace_for([tmp_path / "tasks" / "add" / "optimized.py"], cwd=tmp_path) == tmp_path / "tasks"
    (tmp_path / "tasks" / "pyproject.toml").unlink()

    proc = run_cli("check", "tasks/scale/kernel.py", "--tiers", "0,1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / ".pallasite" / "results.sqlite").is_file()
    assert not (tmp_path / "tasks" / "scale" / ".pallasite").exists()
    info = run_cli("store", "info", cwd=tmp_path)
    assert str(tmp_path / ".pallasite" / "results.sqlite") in info.stdout
    assert [line.split() for line in info.stdout.splitlines() if line.strip().startswith("checks")] == [["checks", "1"]]


def test_summary_counts_skipped_files_apart():
    reports = [_report("a.py"), FileReport(path="b.py", skipped="no Pallas: ...")]
    assert report_format.not_checked(reports[1], (0, 1)) == []
    line = report_format.summary_line(reports, target="v5e", tiers=(0, 1), wall_s=2.0)
    assert line.startswith("1 file(s) checked for v5e, tiers 0,1 in 2.0 s: 0 error(s)")
    assert line.endswith("; 1 file(s) without Pallas skipped")

"""`pallasite check` as a user runs it: exit codes, text and JSON output, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.server import cli
from pallasite.server.commands.cmd_check import UsageError, expand_paths, parse_tiers

DATA = Path(__file__).parent / "data" / "cli"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pallasite.server.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_text_output_names_file_line_and_code_and_exits_1():
    proc = run_cli("check", "--tiers", "0", str(DATA / "bad_block.py"))
    assert proc.returncode == 1, proc.stderr
    first = proc.stdout.splitlines()[0]
    # The block literal (8, 100) sits on line 12; 100 is the offending lane dim.
    assert first.startswith(f"{DATA / 'bad_block.py'}:12:"), proc.stdout
    assert "error[PLS001]" in first
    assert "1 error(s)" in proc.stdout.splitlines()[-1]


def test_clean_file_exits_0():
    proc = run_cli("check", "--tiers", "0", str(DATA / "good_block.py"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 error(s)" in proc.stdout


def test_json_output_follows_version_1_schema():
    proc = run_cli("check", "--tiers", "0", "--format", "json", str(DATA / "bad_block.py"), str(DATA / "plain.py"))
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["version"] == 1 and doc["tiers"] == [0]
    bad, plain = doc["files"]
    assert plain["findings"] == [] and plain["kernels"] == []
    (finding,) = [f for f in bad["findings"] if f["severity"] == "error"]
    assert finding["code"] == "PLS001" and finding["line"] == 12 and finding["tier"] == 0
    assert finding["column"] >= 1 and finding["end_column"] > finding["column"]
    assert finding["fix"] and finding["fix"]["edits"][0]["line"] == 12
    # Applying the fix's edit to the file makes the error go away.
    edit = finding["fix"]["edits"][0]
    lines = (DATA / "bad_block.py").read_text().splitlines(keepends=True)
    line = lines[edit["line"] - 1]
    lines[edit["line"] - 1] = line[: edit["column"] - 1] + edit["new_text"] + line[edit["end_column"] - 1 :]
    assert "(8, 128)" in lines[edit["line"] - 1]
    assert doc["summary"]["errors"] == 1
    assert [k["name"] for k in bad["kernels"]] == ["copy_kernel"]
    assert bad["kernels"][0]["tiers"]["0"] == "error"


def test_suppression_by_severity_flag():
    proc = run_cli("check", "--tiers", "0", "--severity", "PLS001=off", str(DATA / "bad_block.py"))
    assert proc.returncode == 0, proc.stdout
    assert "PLS001" not in proc.stdout


@pytest.mark.parametrize(
    "args, complaint",
    [
        (["check", "no/such/file.py"], "no such file"),
        (["check", "--target", "v9z", str(DATA / "good_block.py")], "unknown chip"),
        (["check", "--tiers", "7", str(DATA / "good_block.py")], "tiers are"),
        (["check", "--severity", "PLS001", str(DATA / "good_block.py")], "CODE=LEVEL"),
        (["check", "--severity", "PLS999=off", str(DATA / "good_block.py")], "unknown code PLS999"),
        (["check", "--time-limit", "-5", str(DATA / "good_block.py")], "positive number of seconds"),
    ],
)
def test_usage_errors_exit_2_with_a_message(args, complaint):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert complaint in proc.stderr


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["frobnicate"])
    assert exc.value.code == 2


def test_parse_tiers_and_expand_paths(tmp_path):
    assert parse_tiers("0-2") == (0, 1, 2)
    assert parse_tiers("2,0") == (0, 2)
    with pytest.raises(UsageError):
        parse_tiers("x")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "k.py").write_text("x = 1\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "hidden.py").write_text("x = 1\n")
    assert expand_paths([str(tmp_path)]) == [str(tmp_path / "pkg" / "k.py")]


COMPILER = Path(__file__).parent / "data" / "compiler"


def test_one_mistake_is_one_error_with_one_hint():
    from pallasite.analysis.codes import CODES

    proc = run_cli("check", "--tiers", "0,1", "--target", "v5e", "--no-cache", str(COMPILER / "tiling_out_spec_broken.py"))
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stdout.splitlines() if "error[" in line]
    assert len(errors) == 1 and "error[PLS001]" in errors[0], proc.stdout  # tier 0 and the lowering agree
    assert "jax lowering (v5e) agrees with PLS001 (as PLS101)" in proc.stdout
    assert proc.stdout.count(CODES["PLS001"].hint) == 1 and CODES["PLS101"].hint not in proc.stdout
    assert "1 error(s)" in proc.stdout.splitlines()[-1]


def test_check_records_in_the_workspace_store_unless_no_cache(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    kernel = tmp_path / "kernel.py"
    kernel.write_text((COMPILER / "store_shape_fixed.py").read_text())
    proc = run_cli("check", "--tiers", "0,1", "--no-cache", "kernel.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / ".pallasite").exists()
    proc = run_cli("check", "--tiers", "0,1", "kernel.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = run_cli("store", "info", cwd=tmp_path)
    assert str(tmp_path / ".pallasite" / "results.sqlite") in info.stdout
    assert [line.split() for line in info.stdout.splitlines() if line.strip().startswith("checks")] == [["checks", "1"]]


def test_hint_severity_is_reported_as_information_in_json():
    proc = run_cli("check", "--tiers", "0", "--format", "json", "--severity", "PLS001=hint", str(DATA / "bad_block.py"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (finding,) = doc["files"][0]["findings"]
    assert finding["severity"] == "information"
    assert doc["summary"]["information"] == 1 and doc["summary"]["errors"] == 0


def test_an_internal_failure_exits_2_not_1(monkeypatch, capsys):
    from pallasite.server.commands import cmd_check

    def broken(paths, options, **kwargs):
        raise RuntimeError("checker exploded")

    monkeypatch.setattr("pallasite.engine.engine.check_paths_sync", broken)
    assert cli.main(["check", "--tiers", "0", "--no-cache", str(DATA / "good_block.py")]) == 2
    err = capsys.readouterr().err
    assert "checker exploded" in err and "internal error" in err
    assert cmd_check  # the module the failure came through


def test_details_flag_prints_the_compiler_output():
    from pallasite.analysis.types import FileReport, Finding, Span
    from pallasite.server.reports.report_format import to_text

    finding = Finding("PLS200", "Mosaic said no", Span(2, 0, 2, 5), tier=2, detail="%0 = tpu.op\n%1 = tpu.other")
    report = FileReport(path="k.py", findings=(finding,))
    assert "tpu.op" not in to_text([report], target="v6e", tiers=(2,))
    with_details = to_text([report], target="v6e", tiers=(2,), details=True)
    assert "    %0 = tpu.op" in with_details and "    %1 = tpu.other" in with_details


def test_serve_on_a_busy_port_or_unwritable_log_is_a_clear_usage_error():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli("serve", "--tcp", "--port", str(port))
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_cli("serve", "--log-file", "/nonexistent-dir/x/pallasite.log")
    assert proc.returncode == 2 and "cannot write the log file" in proc.stderr, proc.stderr


def test_output_cut_short_by_the_reader_is_not_a_traceback():
    proc = subprocess.run(
        f"{sys.executable} -m pallasite.server.cli settings --schema | head -c 10",
        shell=True, capture_output=True, text=True, timeout=60,
    )
    assert len(proc.stdout) == 10
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr

"""The check orchestrator (engine/checker.py): options, tier 0 in-process, worker replies, limits."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import os
import time

import pytest

from pallasite.server.reports import report_format
from pallasite.engine.checker import TARGETS, Checker, CheckOptions
from pallasite.engine.engine import check_paths
from pallasite.engine.workers.backend import Reply
from pallasite.wire.messages import Progress, Stage, check_result_from_plain

DATA = os.path.join(os.path.dirname(__file__), "data", "compiler")
LIMITS = os.path.join(DATA, "limits")
LOCATED = os.path.join(DATA, "located")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


def _check(checker: Checker, path: str, **kwargs):
    return asyncio.run(checker.check(path, **kwargs))


class RecordingClient:
    """Stands in for the backend: records requests (typed params), reports progress, answers with a fixed Reply."""

    def __init__(self, reply: Reply, progress: tuple[Progress, ...] = ()):
        self.reply = reply
        self.progress = progress
        self.requests: list = []

    async def request(self, params, *, purpose="check", timeout_s=None, on_progress=None):
        self.requests.append(params)
        for report in self.progress:
            on_progress(report)
        if self.reply.ok and isinstance(self.reply.result, dict):  # a recorded v1-shaped result
            return dataclasses.replace(self.reply, result=check_result_from_plain(self.reply.result))
        return self.reply


# --------------------------------------------------------------------------- options


def test_options_are_frozen_hashable_and_keep_overrides():
    a = CheckOptions(target="v5e", tiers=(2, 0, 1, 1), severity={"PLS001": "warning"})
    b = CheckOptions(target="v5e", tiers=(0, 1, 2), severity={"PLS001": "warning"})
    assert a == b and hash(a) == hash(b)
    assert a.tiers == (0, 1, 2)
    assert dict(a.severity) == {"PLS001": "warning"}


def test_targets_and_default_chip_come_from_the_chip_names():
    from pallasite.analysis.types import CHIP_TARGETS, DEFAULT_CHIP

    assert TARGETS == tuple(t.name for t in CHIP_TARGETS) == ("v4", "v5e", "v5p", "v6e", "7x")
    assert CheckOptions().target == DEFAULT_CHIP == "v6e"
    assert CheckOptions(target="7x").problems() == []


def test_option_problems_say_what_is_wrong():
    problems = CheckOptions(target="v9", tiers=(0, 7), severity={"PLS999": "loud"}, time_limit_s=0).problems()
    text = "\n".join(problems)
    assert "unknown target 'v9'" in text and "v6e" in text
    assert "unknown tier(s) [7]" in text
    assert "unknown code 'PLS999'" in text and "severity 'loud'" in text
    assert "time limit must be positive" in text
    assert CheckOptions().problems() == []


# --------------------------------------------------------------------------- tier 0 only


def test_tier0_only_never_starts_a_worker_and_reports_kernel_verdicts():
    client = RecordingClient(Reply(status="ok", result={}))
    report = _check(Checker(CheckOptions(tiers=(0,)), client=client), os.path.join(DATA, "tiling_lanes_broken.py"))
    assert client.requests == []
    assert ("PLS001", 19) in [(f.code, f.span.line + 1) for f in report.findings]
    assert [dict(k.tiers)[0] for k in report.kernels] == ["error"]
    assert [dict(k.tiers)[1] for k in report.kernels] == ["not run"]


def test_severity_override_off_and_changed():
    path = os.path.join(DATA, "tiling_lanes_broken.py")
    off = _check(Checker(CheckOptions(tiers=(0,), severity={"PLS001": "off"})), path)
    assert "PLS001" not in [f.code for f in off.findings]
    warn = _check(Checker(CheckOptions(tiers=(0,), severity={"PLS001": "warning"})), path)
    assert {f.severity for f in warn.findings if f.code == "PLS001"} == {"warning"}


def test_unreadable_file_is_a_note_not_a_crash(tmp_path):
    report = _check(Checker(CheckOptions(tiers=(0,))), str(tmp_path / "missing.py"))
    assert report.findings == ()
    assert "cannot read the file" in report.notes[0] and "missing.py" in report.notes[0]


def test_file_that_is_not_utf8_is_a_pls000_error_naming_the_bad_byte():
    client = RecordingClient(Reply(status="ok", result={}))
    path = os.path.join(LOCATED, "not_utf8.py")
    report = _check(Checker(CheckOptions(), client=client), path)
    assert client.requests == []
    [finding] = report.findings
    assert (finding.code, finding.severity, finding.span.line) == ("PLS000", "error", 0)
    assert "not UTF-8" in finding.message and "0xE9, is at line 5, column 6" in finding.message
    assert report.notes == ()


def test_file_with_a_coding_line_is_read_in_its_encoding(tmp_path):
    path = tmp_path / "latin1.py"
    with open(os.path.join(LOCATED, "not_utf8.py"), "rb") as f:
        path.write_bytes(b"# -*- coding: latin-1 -*-\n" + f.read())
    report = _check(Checker(CheckOptions(tiers=(0,))), str(path))
    assert [f.code for f in report.findings] == [] and report.notes == ()
    path.write_bytes(b"# -*- coding: ascii -*-\n" + path.read_bytes().split(b"\n", 1)[1])
    [finding] = _check(Checker(CheckOptions(tiers=(0,))), str(path)).findings
    assert finding.code == "PLS000" and "not valid ascii, the encoding its coding line declares" in finding.message


def test_gpu_kernel_file_skips_the_tpu_compiler_tiers_with_one_note():
    client = RecordingClient(Reply(status="ok", result={}))
    report = _check(Checker(CheckOptions(tiers=(0, 1, 2, 3)), client=client), os.path.join(LOCATED, "gpu_triton_add.py"))
    assert client.requests == []  # no worker: nothing is lowered for TPU
    assert [f for f in report.findings if f.severity == "error"] == []
    assert report.notes == ("tiers 1-3 skipped: tiers 1-3 check TPU kernels; this file's pallas_calls target GPU "
                            "(Triton / Mosaic GPU compiler params or scratch), so only tier 0's backend-neutral rules ran",)
    assert [dict(k.tiers) for k in report.kernels] == [{0: "ok", 1: "skipped: GPU kernel", 2: "skipped: GPU kernel",
                                                       3: "skipped: GPU kernel"}]


def test_store_in_a_helper_lands_on_the_helpers_store_line_with_the_kernels_call_related():
    path = os.path.join(LOCATED, "store_in_helper.py")
    [report] = check_paths([path], CheckOptions(target="v5e", tiers=(1,)))
    [finding] = [f for f in report.findings if f.severity == "error"]
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert finding.code == "PLS104" and lines[finding.span.line].strip().startswith("o_ref[...] = v[:, :64]")
    called = [r for r in finding.related if r.message.startswith("called from the kernel here")]
    assert len(called) == 1 and lines[called[0].span.line].strip() == "_write(o_ref, v)"


def test_syntax_error_skips_the_compiler_tiers_without_a_worker():
    client = RecordingClient(Reply(status="ok", result={}))
    report = _check(Checker(CheckOptions(), client=client), os.path.join(LIMITS, "syntax_error.py"))
    assert client.requests == []
    assert [f.code for f in report.findings] == ["PLS000"]
    assert report.findings[0].span.line + 1 == 7


def test_no_task_gives_pls900_when_the_files_own_code_makes_no_call():
    """No task and no shapes in the source: the worker still imports the file (its top-level code may
    call the kernel, runner/tasks/tasks_recorded.py); when it comes back with nothing, PLS900 (information)."""
    client = RecordingClient(Reply(status="ok", result={"chip": "v6e", "tiers": [1, 2], "entries": [], "errors": [],
                                                        "unavailable": {}}))
    report = _check(Checker(CheckOptions(), client=client), os.path.join(LIMITS, "no_task.py"))
    assert [r.inferred for r in client.requests] == [()]
    assert [(f.code, f.severity) for f in report.findings] == [("PLS900", "information")]
    assert "importing the file made no pallas_call" in report.findings[0].message
    assert {dict(k.tiers)[1] for k in report.kernels} == {"skipped: no example inputs (PLS900)"}


def test_unsaved_text_is_what_gets_checked():
    client = RecordingClient(Reply(status="ok", result={"chip": "v6e", "tiers": [1], "entries": [], "errors": [],
                                                        "unavailable": {}}))
    with open(os.path.join(DATA, "tiling_lanes_fixed.py"), encoding="utf-8") as f:
        text = f.read().replace("(8, 256)", "(8, 100)")
    report = _check(Checker(CheckOptions(tiers=(0, 1)), client=client), os.path.join(DATA, "tiling_lanes_fixed.py"), text=text)
    assert "PLS001" in [f.code for f in report.findings]
    assert client.requests[0].source.text == text and client.requests[0].source.path.endswith("tiling_lanes_fixed.py")


# --------------------------------------------------------------------------- failed worker replies


def test_timeout_during_tier2_becomes_pls205_at_the_pallas_call():
    path = os.path.join(LIMITS, "slow_compile.py")
    client = RecordingClient(Reply(status="timed_out", message="no result after 20 s", limit_s=20),
                             progress=(Progress(Stage.IMPORT, "importing slow_compile.py"),
                                       Progress(Stage.TIER, "tier 1: mm (lowering)", tier=1, entry="mm"),
                                       Progress(Stage.TIER, "tier 2: mm (libtpu compile for v6e)", tier=2, entry="mm")))
    report = _check(Checker(CheckOptions(), client=client), path)
    finding = next(f for f in report.findings if f.code == "PLS205")
    with open(path, encoding="utf-8") as f:
        assert "pallas_call" in f.read().splitlines()[finding.span.line]
    assert {dict(k.tiers)[2] for k in report.kernels} == {"error"}


def test_worker_crash_becomes_pls902():
    client = RecordingClient(Reply(status="crashed", message="the worker was killed by SIGSEGV (11)"))
    report = _check(Checker(CheckOptions(), client=client), os.path.join(DATA, "tiling_lanes_fixed.py"))
    assert [(f.code, f.severity) for f in report.findings if f.severity != "information"] == [("PLS902", "warning")]
    assert "SIGSEGV" in next(f.message for f in report.findings if f.code == "PLS902")


def _python_without_pallasite() -> str | None:
    """A real interpreter that cannot import pallasite (the base Python under the venv), or None."""
    import subprocess
    import sys

    for python in (os.path.join(sys.base_prefix, "bin", "python3"), "/usr/bin/python3"):
        if os.path.isfile(python) and subprocess.run([python, "-P", "-c", "import pallasite"],
                                                     capture_output=True, timeout=60).returncode != 0:
            return python
    return None


def test_worker_interpreter_without_pallasite_is_one_file_level_finding_saying_what_to_install():
    python = _python_without_pallasite()
    if python is None:
        pytest.skip("no interpreter without pallasite on this machine")
    [report] = check_paths([os.path.join(DATA, "store_shape_fixed.py")],
                           CheckOptions(target="v5e", tiers=(0, 1, 2), interpreter=python))
    [finding] = [f for f in report.findings if f.severity in ("error", "warning")]
    assert (finding.code, finding.severity, finding.span.line, finding.kernel, finding.related) == \
        ("PLS906", "warning", 0, None, ())
    assert f"install pallasite into {python}: {python} -m pip install /path/to/pallasite (your checkout)" in finding.message.lower()
    assert "No module named" not in finding.message and "restarted" not in finding.message  # stderr not repeated
    assert {dict(k.tiers)[1] for k in report.kernels} == {"skipped: the check worker could not start (PLS906)"}


def test_missing_worker_interpreter_says_to_set_the_setting():
    [report] = check_paths([os.path.join(DATA, "store_shape_fixed.py")],
                           CheckOptions(target="v5e", tiers=(1,), interpreter="/nonexistent/bin/python"))
    [finding] = report.findings
    assert (finding.code, finding.span.line) == ("PLS906", 0)
    assert "`/nonexistent/bin/python` cannot be run (No such file or directory" in finding.message
    assert "Set the worker interpreter" in finding.message


# --------------------------------------------------------------------------- real worker, real limits


def test_hang_at_import_ends_at_the_time_limit_and_the_worker_recovers():
    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(1,), time_limit_s=8.0))
        try:
            started = time.monotonic()
            hung = await checker.check(os.path.join(LIMITS, "hangs_at_import.py"))
            elapsed = time.monotonic() - started
            after = await checker.check(os.path.join(DATA, "tiling_lanes_broken.py"))
            return hung, elapsed, after
        finally:
            await checker.close()

    hung, elapsed, after = asyncio.run(run())
    [finding] = [f for f in hung.findings if f.severity in ("error", "warning")]
    assert (finding.code, finding.severity) == ("PLS903", "warning")  # not checked, not shown wrong
    # the worker said where the import was when time ran out: the line that never returns
    with open(os.path.join(LIMITS, "hangs_at_import.py"), encoding="utf-8") as f:
        assert f.read().splitlines()[finding.span.line].strip() == "time.sleep(0.5)"
    # stopped by the import's own deadline (a share of the limit): the worker lives on
    assert f"importing the file was still running at line {finding.span.line + 1}" in finding.message
    assert elapsed < 60  # stopped by the limit, not by the test runner
    assert ("PLS101", 19) in [(f.code, f.span.line + 1) for f in after.findings]


def test_file_that_kills_its_interpreter_gives_pls902_and_the_next_check_works():
    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(1,), time_limit_s=60.0))
        try:
            killed = await checker.check(os.path.join(LIMITS, "kills_interpreter.py"))
            after = await checker.check(os.path.join(DATA, "store_shape_broken.py"))
            return killed, after
        finally:
            await checker.close()

    killed, after = asyncio.run(run())
    [finding] = [f for f in killed.findings if f.severity in ("error", "warning")]
    assert (finding.code, finding.severity) == ("PLS902", "warning") and "while importing the file" in finding.message
    # SIGKILL leaves no traceback: the finding is about the file (line 1), not its pallas_call
    assert (finding.span.line, finding.kernel, finding.related) == (0, None, ())
    assert ("PLS104", 13) in [(f.code, f.span.line + 1) for f in after.findings]


def test_file_that_segfaults_at_import_gives_pls902_at_the_line_it_was_running():
    path = os.path.join(LIMITS, "segfaults_at_import.py")
    [report] = check_paths([path], CheckOptions(target="v5e", tiers=(1,), time_limit_s=60.0))
    [finding] = [f for f in report.findings if f.severity in ("error", "warning")]
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert (finding.code, finding.severity) == ("PLS902", "warning") and "SIGSEGV" in finding.message
    assert lines[finding.span.line].startswith("ctypes.string_at(0)")
    assert f"while importing the file, at line {finding.span.line + 1}" in finding.message
    assert finding.related == () and finding.kernel is None
    assert "most recent call first" not in finding.message and "Current thread" in finding.detail  # dump: detail only


@pytest.mark.slow
@pytest.mark.tpu_compiler
@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu is not installed")
def test_compile_running_for_minutes_stops_at_the_time_limit_with_pls205():
    path = os.path.join(LIMITS, "slow_compile.py")
    started = time.monotonic()
    [report] = check_paths([path], CheckOptions(target="v6e", tiers=(1, 2), time_limit_s=20.0))
    assert time.monotonic() - started < 90
    finding = next(f for f in report.findings if f.code == "PLS205")
    # the blocks (768 MiB double-buffered) cannot fit v6e's VMEM: the time limit is said, and the finding
    # is an error at the number that sets the block size (the keyword default), not the pallas_call
    assert finding.severity == "error" and "20 s time limit" in finding.message and "VMEM" in finding.message
    assert report_format.exit_status([report], (1, 2)) == 1
    with open(path, encoding="utf-8") as f:
        assert "block: int = 8192" in f.read().splitlines()[finding.span.line]


def test_check_paths_reports_each_file_in_order():
    paths = [os.path.join(DATA, "store_shape_broken.py"), os.path.join(DATA, "store_shape_fixed.py")]
    reports = check_paths(paths, CheckOptions(target="v5e", tiers=(0, 1)))
    assert [r.path for r in reports] == paths
    assert [(f.code, f.span.line + 1) for f in reports[0].findings if f.severity == "error"] == [("PLS104", 13)]
    assert [f for f in reports[1].findings if f.severity == "error"] == []


@pytest.mark.pipeline
def test_file_over_the_memory_limit_gives_pls904():
    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(1,), memory_mb=1200, time_limit_s=60.0))
        try:
            return await checker.check(os.path.join(LIMITS, "eats_memory.py"))
        finally:
            await checker.close()

    report = asyncio.run(run())
    [finding] = [f for f in report.findings if f.severity in ("error", "warning")]
    assert (finding.code, finding.severity) == ("PLS904", "warning")  # not checked, not shown wrong
    assert "memory limit" in finding.message and "while importing" in finding.message


def test_worker_command_runs_the_worker_through_a_launcher():
    # ``env PATH=...`` stands in for ``ssh tpu-host``: the client runs `<command> pallasite worker ...`.
    import sys

    bin_dir = os.path.dirname(sys.executable)
    launcher = ("env", f"PATH={bin_dir}:{os.environ.get('PATH', '')}")
    paths = [os.path.join(DATA, "store_shape_broken.py")]
    [report] = check_paths(paths, CheckOptions(target="v5e", tiers=(1,), worker_command=launcher))
    assert [(f.code, f.span.line + 1) for f in report.findings if f.severity == "error"] == [("PLS104", 13)]


# --------------------------------------------------------------------------- one hint, one finding per mistake

RECORDS = None


def _recorded(name: str):
    """The worker's real recorded result for a corpus case (tests/data/compiler/records.json)."""
    import json

    global RECORDS
    if RECORDS is None:
        with open(os.path.join(DATA, "records.json"), encoding="utf-8") as f:
            RECORDS = json.load(f)["cases"]
    return RECORDS[name]


@pytest.mark.parametrize("name", ["tiling_lanes", "store_shape", "reshape_relayout", "vmem_oom_blocks", "import_error"])
def test_compiler_messages_leave_the_registry_hint_to_presentation(name):
    from pallasite.analysis.codes import CODES
    from pallasite.server.reports.report_format import finding_text

    client = RecordingClient(Reply(status="ok", result=_recorded(name)))
    report = _check(Checker(CheckOptions(target="v5e", tiers=(1, 2)), client=client), os.path.join(DATA, f"{name}_broken.py"))
    [finding] = [f for f in report.findings if f.severity in ("error", "warning")]  # import_error: PLS901, a warning
    hint = CODES[finding.code].hint
    assert hint not in finding.message and " — " not in finding.message
    assert finding_text(finding, "k.py").count(hint) == 1  # the CLI's help: line, once


def test_no_task_message_leaves_the_hint_to_presentation():
    from pallasite.analysis.codes import CODES

    report = _check(Checker(CheckOptions(), client=RecordingClient(Reply(status="ok", result={}))),
                    os.path.join(LIMITS, "no_task.py"))
    assert CODES["PLS900"].hint not in report.findings[0].message


@pytest.mark.parametrize("name, tier0_code, compiler_code", [
    ("tiling_out_spec", "PLS001", "PLS101"),
    ("index_map_arity", "PLS002", "PLS102"),
    ("dimension_semantics_length", "PLS004", "PLS105"),
    ("spec_count_outputs", "PLS008", "PLS109"),
])
def test_tier0_and_compiler_report_of_one_mistake_is_one_finding(name, tier0_code, compiler_code):
    client = RecordingClient(Reply(status="ok", result=_recorded(name)))
    report = _check(Checker(CheckOptions(target="v5e", tiers=(0, 1, 2)), client=client), os.path.join(DATA, f"{name}_broken.py"))
    errors = [f for f in report.findings if f.severity == "error"]
    assert [f.code for f in errors] == [tier0_code]  # the tier-0 finding is kept, the compiler's folded in
    agreed = [r for r in errors[0].related if "agrees" in r.message]
    assert len(agreed) == 1 and agreed[0].message.startswith(f"jax lowering (v5e) agrees with {tier0_code} (as {compiler_code}): ")
    assert [(dict(k.tiers)[0], dict(k.tiers)[1]) for k in report.kernels] == [("error", "error")]


def test_a_compiler_finding_about_another_mistake_is_kept():
    from pallasite.analysis.types import Finding, Span
    from pallasite.engine.findings.agreement import merge_agreeing

    tier0 = Finding("PLS001", "block dim 100", Span(18, 37, 18, 40), tier=0)
    elsewhere = Finding("PLS101", "tiling", Span(40, 4, 40, 30), tier=1, origin="jax lowering", chip="v5e")
    other_code = Finding("PLS104", "store shape", Span(18, 4, 18, 30), tier=1, origin="jax lowering", chip="v5e")
    kept = merge_agreeing([tier0, elsewhere, other_code])
    assert [f.code for f in kept] == ["PLS001", "PLS101", "PLS104"]
    assert kept[0].related == ()
    nearby = Finding("PLS101", "The lowering requires (8, 128). Block spec args[0].", Span(18, 11, 18, 60),
                     tier=1, origin="jax lowering", chip="v5e")
    [merged] = merge_agreeing([tier0, nearby])
    assert merged.related[0].message == "jax lowering (v5e) agrees with PLS001 (as PLS101): The lowering requires (8, 128)."
    assert merged.related[0].span == nearby.span


def test_a_tier0_warning_the_compiler_rejects_becomes_an_error():
    client = RecordingClient(Reply(status="ok", result=_recorded("tiling_int8_rows")))
    report = _check(Checker(CheckOptions(target="v5e", tiers=(0, 1, 2)), client=client), os.path.join(DATA, "tiling_int8_rows_broken.py"))
    errors = [f for f in report.findings if f.severity == "error"]
    assert [(f.code, f.span.line + 1) for f in errors] == [("PLS010", 19)]
    assert "libtpu compiler (v5e) agrees with PLS010 (as PLS204)" in errors[0].related[-1].message


# --------------------------------------------------------------------------- jax_enable_x64


def test_x64_breaking_a_float32_kernel_is_pls107_at_the_setting_line():
    client = RecordingClient(Reply(status="ok", result=_recorded("x64_enabled")))  # libtpu's real words
    path = os.path.join(DATA, "x64_enabled_broken.py")
    report = _check(Checker(CheckOptions(target="v5e", tiers=(0, 1, 2)), client=client), path)
    [finding] = [f for f in report.findings if f.severity == "error"]
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert finding.code == "PLS107" and finding.tier == 2
    assert lines[finding.span.line].startswith('jax.config.update("jax_enable_x64", True)')
    assert finding.message.startswith("jax_enable_x64 is on (at line 7), so the Python ints")
    assert "i64" in finding.message and "jax.enable_x64(False)" in finding.message
    assert "pallas_call" in lines[next(r.span.line for r in finding.related if r.message == "the pallas_call")]


def test_x64_set_outside_the_file_lands_on_the_pallas_call():
    with open(os.path.join(DATA, "x64_enabled_broken.py"), encoding="utf-8") as f:
        text = f.read().replace('jax.config.update("jax_enable_x64", True)', "# x64 comes from JAX_ENABLE_X64")
    client = RecordingClient(Reply(status="ok", result=_recorded("x64_enabled")))
    report = _check(Checker(CheckOptions(target="v5e", tiers=(1, 2)), client=client),
                    os.path.join(DATA, "x64_enabled_broken.py"), text=text)
    [finding] = [f for f in report.findings if f.severity == "error"]
    assert finding.code == "PLS107" and "not in this file" in finding.message
    assert "pallas_call" in text.splitlines()[finding.span.line]


def test_an_i64_message_without_x64_stays_a_generic_compiler_error():
    import copy

    result = copy.deepcopy(_recorded("x64_enabled"))
    for rec in result["entries"][0]["errors"]:
        rec.pop("x64", None)
    client = RecordingClient(Reply(status="ok", result=result))
    report = _check(Checker(CheckOptions(target="v5e", tiers=(1, 2)), client=client), os.path.join(DATA, "x64_enabled_broken.py"))
    assert [f.code for f in report.findings if f.severity == "error"] == ["PLS200"]


def test_a_main_block_the_checker_runs_by_itself_reports_where_it_stopped(tmp_path):
    """No task and no shapes in the source: the checker runs the file's __main__ block itself (it
    used to point at --script). This one reads sys.argv[1] before its first call: a warning at that
    line saying nothing was checked, never an error and never a silent pass."""
    from pathlib import Path

    data = Path(__file__).parent / "data" / "scripts"
    text = (data / "small_block_hidden.py").read_text().replace(  # shapes no longer readable from the file
        "x = jnp.ones((16, 256), jnp.float32)", "x = jnp.ones((int(sys.argv[1]), 256), jnp.float32)")
    (tmp_path / "no_static_shapes.py").write_text("import sys\n" + text)
    (report,) = check_paths([str(tmp_path / "no_static_shapes.py")], CheckOptions(tiers=(0, 1)))
    [(code, severity, line, message)] = [(f.code, f.severity, f.span.line + 1, f.message) for f in report.findings
                                         if f.severity in ("error", "warning")]
    assert (code, severity) == ("PLS908", "warning")
    assert "sys.argv[1]" in text.splitlines()[line - 2]  # the added import shifted the lines by one
    assert "nothing was checked" in message


def test_zero_config_checks_a_file_that_runs_its_kernel_in_interpret_mode_for_the_tpu():
    """small_block_hidden.py has no task and runs its kernel with interpret=True, which hides its
    (4, 64) block from the TPU lowering; its shapes are read from main() and the lowering runs
    without interpret, so the tiling error is found (it was a PLS900 note before)."""
    from pathlib import Path

    path = Path(__file__).parent / "data" / "scripts" / "small_block_hidden.py"
    (report,) = check_paths([str(path)], CheckOptions(tiers=(1,)))
    assert [f.code for f in report.findings if f.severity == "error"] == ["PLS101"], report.findings
    assert any("shapes from line" in n for n in report.notes)

"""Files as authors write them, checked with no configuration (issue 27; the TPU-only branch of 29).

The fixtures in tests/data/guides/ are written the way jax's Pallas TPU guides and tutorials are:
kernels called at the top level without ``interpret`` (with numpy checks of the results right
after), called only from a ``__main__`` block, or only when ``jax.default_backend() == "tpu"``. Each
must reach the TPU compiler for every kernel it calls (runner/recording.py, runner/tasks/tasks_recorded.py,
runner/target_chip.py), and no "could not check" outcome (PLS9xx) may be an error.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time

import pytest

from pallasite.analysis.codes import CODES
from pallasite.engine.checker import Checker, CheckOptions

DATA = os.path.join(os.path.dirname(__file__), "data", "guides")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
TIERS = (0, 1, 2) if HAS_LIBTPU else (0, 1)


def _line_of(name: str, needle: str) -> int:
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return next(i + 1 for i, line in enumerate(f) if needle in line)


@pytest.fixture(scope="module")
def check():
    loop = asyncio.new_event_loop()
    checker = Checker(CheckOptions(target="v5e", tiers=TIERS, time_limit_s=120.0))
    yield lambda name, **kw: loop.run_until_complete(checker.check(os.path.join(DATA, name), **kw))
    loop.run_until_complete(checker.close())
    loop.close()


def _serious(report):
    return [(f.code, f.severity, f.span.line + 1) for f in report.findings if f.severity in ("error", "warning")]


def _compiled(report) -> dict[str, dict[int, str]]:
    return {k.name: {t: s for t, s in k.tiers if t in TIERS and t} for k in report.kernels}


# every kernel each guide-style file calls, by the name of its verdict
CLEAN = {
    "toplevel_calls.py": {"add_kernel", "matmul_kernel"},
    "main_block.py": {"softmax_kernel"},
    "tpu_branch_main.py": {"scale_kernel"},
    "partly_main.py": {"double_kernel", "negate_kernel"},
}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_every_kernel_a_guide_style_file_calls_reaches_the_compiler(check, name):
    """Before: PLS901 (an error: "Only interpret mode is supported on CPU backend") at the first
    top-level call, or PLS900 "no task"; no kernel got past tier 0."""
    report = check(name)
    assert _serious(report) == [], [f.message for f in report.findings]
    compiled = _compiled(report)
    assert set(compiled) == CLEAN[name], compiled
    assert all(state == "ok" for states in compiled.values() for state in states.values()), compiled
    assert all(set(states) == set(TIERS) - {0} for states in compiled.values()), compiled


@pytest.mark.parametrize("name, where", [
    ("toplevel_calls.py", "shapes from importing toplevel_calls.py: its top-level code made 3 pallas_calls (3 distinct"),
    ("main_block.py", "shapes from running main_block.py's __main__ block (importing it made no pallas_call)"),
    ("tpu_branch_main.py", "shapes from running tpu_branch_main.py's __main__ block"),
    ("partly_main.py", "and from running partly_main.py's __main__ block (the calls at line 21 were not reached by "
                       "the import)"),
])
def test_one_note_says_where_the_shapes_came_from(check, name, where):
    report = check(name)
    said = [n for n in report.notes if n.startswith("shapes from")]
    assert len(said) == 1 and where in said[0], report.notes


def test_a_results_check_that_stand_ins_cannot_pass_is_a_note_not_a_finding(check):
    """toplevel_calls.py asserts its kernel's result right after the call: the call was recorded, not
    run (its output is zeros), so the assert fails; that says nothing about the kernel."""
    report = check("toplevel_calls.py")
    line = _line_of("toplevel_calls.py", "np.testing.assert_allclose(add(x, y), x + y)")
    assert any(f"line {line} raised AssertionError after kernels it called were recorded instead of run" in n
               for n in report.notes), report.notes
    # the two block configurations of the jitted matmul are two entries (one trace each)
    assert sum("tier 2 memory for matmul" in n for n in report.notes) == (2 if HAS_LIBTPU else 0)


def test_a_hidden_tiling_error_in_a_top_level_call_is_found(check):
    report = check("toplevel_bad_block.py")
    errors = [(f.code, f.span.line + 1) for f in report.findings if f.severity == "error"]
    assert errors == [("PLS101", _line_of("toplevel_bad_block.py", "# EXPECTED LINE"))], report.findings


def test_a_top_level_call_on_sharded_operands_outside_shard_map_is_an_error_at_the_pallas_call(check):
    report = check("sharded_toplevel.py")
    errors = [(f.code, f.span.line + 1) for f in report.findings if f.severity == "error"]
    assert errors == [("PLS115", _line_of("sharded_toplevel.py", "# EXPECTED LINE"))], report.findings


def test_a_kernel_using_the_axes_of_its_shard_map_is_not_called_wrong_when_checked_outside_it(check):
    """Before: PLS100, an error ("Found an unbound axis name: x"), on a correct kernel."""
    report = check("shard_map_axis.py")
    assert _serious(report) == [], [f.message for f in report.findings]
    states = {s for k in report.kernels for t, s in k.tiers if t in (1, 2)}
    assert len(states) == 1 and states.pop().startswith("skipped: the kernel uses the named axes it was called under "
                                                        "('x' (4), shard_map)")


def test_a_top_level_statement_that_fails_here_is_a_warning_and_the_rest_still_runs(check):
    report = check("optional_module.py")
    assert _serious(report) == [("PLS909", "warning", _line_of("optional_module.py", "# EXPECTED LINE"))]
    assert "the file's other top-level statements still ran" in report.findings[0].message
    assert all(s == "ok" for states in _compiled(report).values() for s in states.values()), report.kernels


def test_a_statement_that_runs_too_long_is_stopped_and_the_kernels_after_it_are_checked(tmp_path):
    """A guide's CPU benchmark cell is stopped at its share of the import's time; the kernel call
    after it is still recorded and compiled."""
    text = open(os.path.join(DATA, "optional_module.py"), encoding="utf-8").read().replace(
        "import pallasite_test_optional_plotting_module  # EXPECTED LINE",
        "import time\nfor _ in range(600):  # a benchmark that takes a minute on a CPU\n    time.sleep(0.1)")
    path = tmp_path / "slow_cell.py"
    path.write_text(text)

    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(0, 1), time_limit_s=20.0))
        try:
            started = time.monotonic()
            return await checker.check(str(path)), time.monotonic() - started
        finally:
            await checker.close()

    report, elapsed = asyncio.run(run())
    assert elapsed < 20
    [(code, severity, line)] = _serious(report)
    assert (code, severity) == ("PLS903", "warning") and text.splitlines()[line - 1].strip() == "time.sleep(0.1)"
    assert "the file's other top-level statements still ran" in report.findings[0].message
    assert {dict(k.tiers)[1] for k in report.kernels} == {"ok"}


def test_no_could_not_check_code_is_an_error():
    """PLS901 (an import that failed), PLS902 (a crash), PLS905 (an invalid task) and a worker that
    could not start (PLS906) were errors."""
    from pallasite.engine.workers.backend import Reply
    from pallasite.engine.findings.reply_failures import startup_failure

    assert {c.code: c.severity for c in CODES.values() if c.code.startswith("PLS9") and c.severity == "error"} == {}
    assert startup_failure(Reply("not_started", message="no python"), "python3", (1, 2), "v5e").severity == "warning"


# --------------------------------------------------------------------------- on the worker side


def test_user_code_sees_the_target_tpu_and_jax_still_sees_its_cpu(tmp_path):
    import jax

    from pallasite.runner.target_chip import target_chip

    probe = tmp_path / "probe.py"  # code outside jax and pallasite: the user's
    probe.write_text("import jax\n"
                     "def ask():\n"
                     "    d = jax.devices()[0]\n"
                     "    return jax.default_backend(), d.platform, d.device_kind\n"
                     "def tpu_devices():\n"
                     "    return len(jax.devices('tpu'))\n")
    spec = importlib.util.spec_from_file_location("probe_user_code", probe)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with target_chip("v5e"):
        assert module.ask() == ("tpu", "tpu", "TPU v5 lite")
        assert module.tpu_devices() == len(jax.devices())
        from jax._src import xla_bridge

        assert xla_bridge.get_backend().platform == "cpu"
        assert jax.jit(lambda a: a + 1)(jax.numpy.ones(3)).devices() == {jax.devices()[0]}  # still made on the CPU
    assert module.ask() == ("cpu", "cpu", "cpu")


def test_a_load_that_goes_on_records_each_failing_statement(tmp_path):
    from pallasite.runner.loader import load_user_module

    path = tmp_path / "cells.py"
    path.write_text("from __future__ import annotations\nA = 1\nraise ValueError('cell 2')\nB: undefined = A + 1\n"
                    "C = missing_name\nD = 4\n")
    failures: list = []
    module = load_user_module(str(path), failures=failures)
    assert (module.A, module.B, module.D) == (1, 2, 4)  # the annotation is never evaluated: __future__ holds
    assert [(line, type(exc).__name__) for line, exc in failures] == [(3, "ValueError"), (5, "NameError")]


def test_an_import_that_outgrows_the_memory_limit_is_stopped_short_and_its_calls_are_checked():
    """Before: the worker was killed at its memory limit and every recorded call was lost (PLS904 at
    line 1, no kernel checked). The next file's check works in the same checker."""
    async def run():
        checker = Checker(CheckOptions(target="v5e", tiers=(0, 1), time_limit_s=300.0, memory_mb=1536))
        try:
            big = await checker.check(os.path.join(DATA, "big_arrays.py"))
            after = await checker.check(os.path.join(DATA, "optional_module.py"))
            return big, after
        finally:
            await checker.close()

    report, after = asyncio.run(run())
    [(code, severity, line)] = _serious(report)
    assert (code, severity, line) == ("PLS904", "warning", _line_of("big_arrays.py", "# EXPECTED LINE"))
    assert "close to its 1536 MiB limit" in report.findings[0].message
    assert {dict(k.tiers)[1] for k in report.kernels} == {"ok"}
    assert [c for c, _, _ in _serious(after)] == ["PLS909"]


@pytest.mark.parametrize("share, replaced", [(0.0, True), (1.0, False)])
def test_a_worker_left_holding_much_of_its_memory_limit_is_replaced_before_the_next_request(monkeypatch, share,
                                                                                           replaced):
    """Memory a file's arrays took stays with the process: a worker left above REPLACE_SHARE of its
    limit is replaced, so the next file does not start near the limit (and get stopped at once)."""
    from pallasite.engine.workers import client as client_mod
    from pallasite.engine.workers.client import WorkerClient, WorkerConfig
    from pallasite.wire.messages import PingParams

    monkeypatch.setattr(client_mod, "REPLACE_SHARE", share)

    async def run():
        async with WorkerClient(WorkerConfig(timeout_s=60.0, memory_mb=2048)) as worker:
            assert (await worker.request(PingParams())).ok
            first = worker.pid if worker.alive else None  # the process that answered, if it was kept
            assert (await worker.request(PingParams())).ok
            return first, worker.pid, worker.restarts

    first, second, restarts = asyncio.run(run())
    assert (first != second, restarts) == (replaced, int(replaced))


def test_a_check_under_the_memory_guard_leaves_the_worker_fast_for_the_next_op(tmp_path):
    """The guard ended by clearing its async exception with NULL, which left CPython's eval breaker set
    for good: the time op that followed a check in the same worker (optimize's test phase) then traced
    under ``sys.setprofile`` for minutes and hit its limit. Now the next op answers as on a fresh worker."""
    from pallasite.engine.engine import Engine
    from pallasite.engine.timing import task_files, time_request

    kernel = tmp_path / "kernel.py"
    kernel.write_text(open(os.path.join(os.path.dirname(__file__), "data", "optimize", "add.py")).read())

    async def run():
        engine = Engine()
        options = CheckOptions(target="v6e", tiers=(0, 1), memory_mb=4096)
        try:
            report = await engine.check(str(kernel), options, store=False)
            reply = await engine.backend(options).request(time_request(task_files(str(kernel)), "time"),
                                                          purpose="check", timeout_s=120)
            return report, reply
        finally:
            await engine.close()

    report, reply = asyncio.run(run())
    assert not [f for f in report.findings if f.severity == "error"]
    assert reply.status == "ok", reply.why
    assert reply.result.verdict == "ok"

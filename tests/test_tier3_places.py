"""Tier-3 findings (and a wrong out_shape dtype) at the statement behind them, end to end.

Each fixture of tests/data/tier3_places/ is a small real kernel with one mistake; the line where
the finding belongs carries ``# expect: CODE``. Before runner/tier3/interpret_places.py, tier 3 put an
unwritten output at ``out_specs``, a missing accumulator init at ``scratch_shapes``, an
out-of-bounds read of a VMEM block at the pallas_call, and an int32 ``out_shape`` either at the
store the lowering rejected or at the pallas_call; a reference that raised was the kernel's error.
A jitted entry whose one-TensorCore rerun came from jax's trace cache lost the kernel's places (the
missing init was said at the pallas_call) until that rerun kept the first run's recorded call; a
first-step block that initialises nothing left the finding at the accumulator's first read. A store
on one branch of ``lax.cond`` was a PLS304 mismatch at the pallas_call (the skipped steps' blocks
keep the buffer's earlier contents, so no NaN showed) until tier 3 reran with the output blocks
refilled with NaN before each step. An out-of-bounds DMA driven by a page table that
``example_inputs`` gives as an array beside shaped inputs was missed (the page table was made up as
zeros) until tier 3 kept the given arrays.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import check_paths

pytestmark = pytest.mark.pipeline  # a whole command end to end per test: .ci/run's pipeline step (issue 58)

DATA = Path(__file__).parent / "data" / "tier3_places"
TIER3 = ("unwritten_guard.py", "never_written.py", "init_missing.py", "oob_window.py", "out_dtype_silent.py",
         "init_missing_jitted.py", "init_block_empty.py", "cond_skip.py", "paged_oob_dma.py",
         "store_removed_helper.py", "store_removed_first.py", "init_rmw.py", "store_deleted_variant.py",
         "store_deleted_helper.py", "oob_offset_helper.py", "init_first_missing.py")


def _expected(name: str) -> tuple[str, int]:
    lines = (DATA / name).read_text().splitlines()
    [(code, line)] = [(m.group(1), i + 1) for i, text in enumerate(lines) if (m := re.search(r"# expect: (PLS\d+)", text))]
    return code, line


@pytest.fixture(scope="module")
def reports():
    out = check_paths([str(DATA / n) for n in TIER3 + ("reference_fails.py", "out_dtype_narrow.py")],
                      CheckOptions(target="v5e", tiers=(3,), time_limit_s=180))
    return {Path(r.path).name: r for r in out}


@pytest.mark.parametrize("name", TIER3)
def test_tier3_finding_is_at_the_statement_behind_it(reports, name):
    code, line = _expected(name)
    errors = [f for f in reports[name].findings if f.severity == "error"]
    assert [(f.code, f.span.line + 1) for f in errors] == [(code, line)], [f"{f.code}:{f.span.line + 1} {f.message}" for f in errors]


def test_unwritten_output_names_the_guard_and_relates_the_store(reports):
    [finding] = [f for f in reports["unwritten_guard.py"].findings if f.severity == "error"]
    assert "o_ref is written only when k == nk" in finding.message
    assert any(r.message == "the store to o_ref" for r in finding.related)


def test_a_removed_store_is_said_at_the_pass_left_in_its_helper(reports):
    [finding] = [f for f in reports["store_removed_helper.py"].findings if f.severity == "error"]
    assert "a `pass` stands where o_ref would be stored" in finding.message


def test_a_store_skipped_on_one_branch_is_said_at_the_store(reports):
    [finding] = [f for f in reports["cond_skip.py"].findings if f.severity == "error"]
    assert "2 of 4 blocks" in finding.message and "never written by the step that owns them" in finding.message


def test_missing_init_names_the_accumulator_and_its_first_read(reports):
    [finding] = [f for f in reports["init_missing.py"].findings if f.severity == "error"]
    assert "initialises other buffers but not acc_ref" in finding.message
    assert any("acc_ref is read here before anything wrote it" == r.message for r in finding.related)


def test_wrong_out_shape_dtype_found_by_tier3_is_at_the_dtype(reports):
    [finding] = [f for f in reports["out_dtype_silent.py"].findings if f.severity == "error"]
    assert "output 0 is int32 but the reference returns float32" in finding.message
    assert any(r.message == "where the wrong dtype shows" for r in finding.related)


def test_a_float_out_shape_of_another_width_is_a_warning_at_the_dtype(reports):
    """bfloat16 declared where the reference returns float32: the values pass bfloat16's tolerance, so tier 3
    said nothing before (only integers against floats were a dtype finding)."""
    code, line = _expected("out_dtype_narrow.py")
    findings = reports["out_dtype_narrow.py"].findings
    assert [(f.code, f.span.line + 1, f.severity) for f in findings] == [(code, line, "warning")], \
        [f"{f.code}:{f.span.line + 1} {f.severity} {f.message}" for f in findings]
    assert "output 0 is bfloat16 but the reference returns float32" in findings[0].message
    assert "a float of another width" in findings[0].message


def test_a_reference_that_raises_is_a_note_and_the_kernel_is_still_checked(reports):
    report = reports["reference_fails.py"]
    assert [(f.code, f.severity) for f in report.findings] == [("PLS905", "information")], \
        [f.message for f in report.findings]
    assert "the reference raised on the candidate's inputs" in report.findings[0].message


def test_store_of_floats_into_an_int32_out_shape_is_at_the_out_shape():
    [report] = check_paths([str(DATA / "out_dtype_store.py")], CheckOptions(target="v5e", tiers=(1,), time_limit_s=120))
    code, line = _expected("out_dtype_store.py")
    errors = [f for f in report.findings if f.severity == "error"]
    assert [(f.code, f.span.line + 1) for f in errors] == [(code, line)], [f.message for f in errors]
    store_line = next(i for i, text in enumerate((DATA / "out_dtype_store.py").read_text().splitlines())
                      if text.strip().startswith("o_ref[...] ="))
    assert any(r.span.line == store_line and "stores float32 values into o_ref" in r.message for r in errors[0].related)


def test_inputs_no_block_cuts_directly_are_shrunk_by_tracing_and_checked():
    [report] = check_paths([str(DATA / "transposed_large.py")],
                           CheckOptions(target="v5e", tiers=(3,), memory_mb=1500, time_limit_s=180))
    assert [f.code for f in report.findings] == [], [f.message for f in report.findings]
    note = next(n for n in report.notes if n.startswith("tier 3:"))
    assert "shrunk from float32[8, 2048, 32, 128]" in note
    assert {dict(k.tiers)[3] for k in report.kernels} == {"ok"}


def test_shrinking_keeps_every_block_and_stops_within_the_budget():
    import jax

    from pallasite.runner.tier3 import interpret
    from pallasite.runner.tier3.interpret_shrink import BUDGET_BYTES, blocks_of, input_bytes, shrink_further
    from pallasite.runner.loader import user_module
    from pallasite.runner.tasks.tasks_runtime import discover

    path = str(DATA / "transposed_large.py")
    with user_module(path) as module:
        [task] = discover(module, path)
        args = task.abstract_args()
        spaces = interpret._namespaces(task.entry)
        calls = interpret.probe_calls(task.entry, args, spaces)
        first, _ = interpret.shrink_shapes(args, calls)
        assert input_bytes(first) > BUDGET_BYTES  # the first rule leaves them large
        small, changed = shrink_further(task.entry, args, calls, lambda a: interpret.probe_calls(task.entry, a, spaces))
        assert changed and input_bytes(small) <= BUDGET_BYTES < input_bytes(args)
        assert blocks_of(interpret.probe_calls(task.entry, small, spaces)) == blocks_of(calls)
        assert all(isinstance(a, jax.ShapeDtypeStruct) for a in small)


def test_semantics_the_interpreter_rejects_are_one_warning_for_a_jitted_entry():
    """The rerun with the parallel axes as a prefix ran the jitted entry's cached program again
    (the order the interpreter rejects) and made a false error at the entry's call (PLS300)."""
    [report] = check_paths([str(DATA / "semantics_not_prefix_jitted.py")],
                           CheckOptions(target="v5p", tiers=(3,), time_limit_s=180))
    assert [(f.code, f.severity) for f in report.findings] == [("PLS305", "warning")], \
        [f"{f.code}:{f.span.line + 1} {f.message}" for f in report.findings]


def test_reruns_after_the_prefix_rerun_keep_its_order():
    """The zero-filled rerun that tells an unwritten block from a computed NaN ran the order the
    interpreter rejects (a cached program): it failed, the cause stayed unknown, and the finding
    went to the pallas_call instead of the guard that is never true."""
    [report] = check_paths([str(DATA / "semantics_not_prefix_unwritten.py")],
                           CheckOptions(target="v5p", tiers=(3,), time_limit_s=180))
    code, line = _expected("semantics_not_prefix_unwritten.py")
    errors = [f for f in report.findings if f.severity == "error"]
    assert [(f.code, f.span.line + 1) for f in errors] == [(code, line)], [f"{f.code}:{f.span.line + 1} {f.message}" for f in errors]
    assert [f.code for f in report.findings if f.severity == "warning"] == ["PLS305"]


@pytest.mark.slow
@pytest.mark.parametrize("target, severity", [("v5p", "error"), ("v5e", "warning")])
def test_a_reduction_axis_marked_parallel_is_found_by_running_it_backward(target, severity):
    """Under jax.vmap (the interpreter runs no semantics there) and with no reference to compare with,
    a reduction axis marked "parallel" was found at no tier; run backward, it changes the output. On a
    one-core chip it is harmless: a warning naming the two-core chips."""
    names = ("parallel_vmapped.py", "parallel_no_reference.py")
    out = check_paths([str(DATA / n) for n in names], CheckOptions(target=target, tiers=(3,), time_limit_s=180))
    for report in out:
        code, line = _expected(Path(report.path).name)
        found = [(f.code, f.span.line + 1, f.severity) for f in report.findings if f.severity in ("error", "warning")]
        assert found == [(code, line, severity)], [f.message for f in report.findings]
        [finding] = [f for f in report.findings if f.code == code]
        assert "grid axis 2 carries state from step to step" in finding.message


"""The locate step (issue 57): after tier 3 finds wrong, NaN or unwritten outputs, the statement that makes
them so, with an edit verified to fix it. Fixture kernels with planted bugs (tests/data/locate/): an
accumulator zeroed on the wrong grid axis, a causal mask off by one, a softmax scale's exponent, a grid
missing ``pl.cdiv``, an inverted ``pl.when``, an output index map's results swapped.

The edits (``runner/tier3/locate_edits.py``: ast only), the worker's step on each fixture (``runner/tier3/locate_step.py``),
the client's findings (``engine/findings/locate_step.py``), and the whole path through `pallasite check --locate`;
the LSP and MCP paths are in test_lsp_compiler.py and test_mcp.py. Before this step every one of these
findings was said at the ``pallasite_call`` (or, for the grid, at the store) with no fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.analysis.types import FileReport, Finding, Related, Span
from pallasite.engine.findings import locate_step as client_step
from pallasite.runner.tier3 import locate_edits
from pallasite.wire import messages

DATA = Path(__file__).parent / "data" / "locate"

# fixture, the planted line, the text the fix writes there, the text it replaces
PLANTED = {
    "acc_wrong_axis": (14, "2", "1"),
    "mask_off_by_one": (19, "rows >= cols", "rows > cols"),
    "softmax_scale": (27, "head_dim ** -0.5", "head_dim ** 0.5"),
    "scale_in_helper": (17, "head_dim ** -0.5", "head_dim ** 0.5"),  # a helper neither kernel nor wrapper
    "grid_no_cdiv": (23, "pl.cdiv(n, ROWS)", "n // ROWS"),
    "when_inverted": (14, "pl.program_id(2) == 0", "pl.program_id(2) != 0"),
    "when_in_dispatched_helper": (26, "pl.program_id(2) == 0", "pl.program_id(2) != 0"),  # the body named, not called
    "index_map_swap": (26, "(i, j)", "(j, i)"),
    "length_mask_off": (23, "col < lengths_ref[b]", "col <= lengths_ref[b]"),  # wrong only with dead inputs poisoned
}
FAST = ("mask_off_by_one", "grid_no_cdiv", "scale_in_helper", "length_mask_off")  # one edit each before the fix: the default suite runs these


def _call_line(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if "pl.pallas_call(" in line)


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_the_planted_fix_is_among_the_edits_and_applies_at_its_line(name):
    text = (DATA / f"{name}.py").read_text()
    line, new, old = PLANTED[name]
    edits = locate_edits.candidate_edits(text, _call_line(text), None, 3, None, locate_edits.Signals())
    found = [e for e in edits if e.line == line and e.new == new and e.old == old]
    assert found, [(e.line, e.what) for e in edits]
    edited = locate_edits.apply(text, found[0])
    assert edited.splitlines()[line - 1].count(new) == 1 and edited.count("\n") == text.count("\n")


def test_edits_rank_by_what_tier_3_saw():
    text = (DATA / "mask_off_by_one.py").read_text()
    few = locate_edits.candidate_edits(text, _call_line(text), None, 2, None, locate_edits.Signals(fraction=0.004))
    assert (few[0].line, few[0].new) == (19, "rows >= cols")  # a few elements wrong: comparisons first
    text = (DATA / "grid_no_cdiv.py").read_text()
    nan = locate_edits.candidate_edits(text, _call_line(text), None, 1, None, locate_edits.Signals(nan=True))
    assert nan[0].kind == "cdiv" and nan[0].line == 23


def test_a_comparison_that_builds_a_mask_ranks_first_even_when_most_elements_are_wrong():
    # a causal mask off by one lets one more key into every row: most outputs move, not a few
    text = (DATA / "mask_off_by_one.py").read_text()
    most = locate_edits.candidate_edits(text, _call_line(text), None, 2, None, locate_edits.Signals(fraction=0.9))
    assert (most[0].line, most[0].new, most[0].role) == (19, "rows >= cols", "mask")
    text = (DATA / "grid_no_cdiv.py").read_text()  # no mask there: the NaN ranking is unchanged
    nan = locate_edits.candidate_edits(text, _call_line(text), None, 1, None, locate_edits.Signals(nan=True))
    assert nan[0].kind == "cdiv"


def test_kernel_lines_the_traced_run_never_reached_get_no_edit():
    text = (DATA / "mask_off_by_one.py").read_text()
    call = _call_line(text)
    reached = frozenset({16, 17, 18})  # line 19 (the mask) left out
    edits = locate_edits.candidate_edits(text, call, None, 2, reached, locate_edits.Signals())
    assert not [e for e in edits if e.line == 19]
    assert [e for e in edits if e.line == 17]


def test_a_helper_the_kernel_names_is_edited_unless_the_run_never_reached_it():
    text = (DATA / "when_in_dispatched_helper.py").read_text()
    call = _call_line(text)
    reached = frozenset(range(14, 17)) | frozenset(range(25, 35))  # the kernel and _accumulate_step, not _single_step
    edits = locate_edits.candidate_edits(text, call, None, 3, reached, locate_edits.Signals())
    assert [e for e in edits if e.line == 26 and e.new == "pl.program_id(2) == 0"]
    assert not [e for e in edits if 19 <= e.line <= 22]
    everything = locate_edits.candidate_edits(text, call, None, 3, None, locate_edits.Signals())
    assert [e for e in everything if e.line == 20]  # no trace known: every named helper is a candidate


def test_an_init_that_accumulates_over_several_lines_is_written_as_an_assignment():
    text = (DATA / "when_inverted.py").read_text().replace("pl.program_id(2) != 0", "pl.program_id(2) == 0")
    text = text.replace("acc_ref[...] = jnp.zeros_like(acc_ref)",
                        "acc_ref[...] += jnp.zeros(\n            acc_ref.shape, jnp.float32\n        )")
    edits = locate_edits.candidate_edits(text, _call_line(text), None, 3, None, locate_edits.Signals(nan=True))
    (init,) = [e for e in edits if e.kind == "init" and e.line == 16]
    edited = locate_edits.apply(text, init)
    assert "acc_ref[...] = jnp.zeros(\n" in edited and "+= jnp.zeros" not in edited
    assert edited.count("\n") == text.count("\n")


def _worker_locate(name: str) -> messages.LocatedEntry:
    from pallasite.runner.tier3.locate_step import handle_locate

    path = DATA / f"{name}.py"
    source = messages.Sources(messages.SourceFile(str(path), path.read_text()))
    (entry,) = handle_locate(messages.LocateParams(source=source, chip="v6e", budget_s=120)).entries
    return entry


def _assert_fixed(name: str, entry: messages.LocatedEntry) -> None:
    line, new, old = PLANTED[name]
    assert entry.state == "fixed", (entry.state, entry.reason, entry.tried)
    assert (entry.fix.line, entry.fix.new_text, entry.fix.old_text) == (line, new, old)
    assert entry.verified_sets == 3 and entry.shapes and entry.problem


@pytest.mark.parametrize("name", FAST)
def test_the_worker_finds_the_planted_statement_and_verifies_its_fix(name):
    _assert_fixed(name, _worker_locate(name))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(PLANTED) - set(FAST)))
def test_the_worker_finds_the_planted_statement_and_verifies_its_fix_slow(name):
    _assert_fixed(name, _worker_locate(name))


def test_a_correct_kernel_is_skipped_and_nothing_is_edited(tmp_path):
    from pallasite.runner.tier3.locate_step import handle_locate

    text = (DATA / "mask_off_by_one.py").read_text().replace("rows > cols", "rows >= cols")
    path = tmp_path / "fixed.py"
    path.write_text(text)
    source = messages.Sources(messages.SourceFile(str(path), text))
    (entry,) = handle_locate(messages.LocateParams(source=source, chip="v6e", budget_s=30)).entries
    assert entry.state == "skipped" and "right" in entry.reason and entry.fix is None


# --------------------------------------------------------------------------- the client's findings


def _report(span: Span, code: str = "PLS304") -> FileReport:
    finding = Finding(code=code, message="output 0 differs from the reference in 256 of 65536 elements", span=span,
                      tier=3, kernel="causal_scores_kernel", origin="TPU interpreter")
    return FileReport(path="k.py", findings=(finding,), wrong_outputs=("causal_scores",))


def _edit(line: int, new: str, old: str) -> messages.SourceEdit:
    return messages.SourceEdit(line, 28, line, 28 + len(old), new, old, f"`{old}` -> `{new}`", "comparison")


def test_a_fixed_entry_moves_the_finding_to_the_edit_with_a_verified_fix():
    call = Span(23, 4, 23, 30)
    answer = messages.LocatedEntry("causal_scores", "fixed", kernel="causal_scores_kernel",
                                   fix=_edit(19, "rows >= cols", "rows > cols"), verified_sets=3,
                                   shapes="float32[256, 128]", problem="output 0: 256 of 65536 elements off")
    out = client_step.apply_located(_report(call), messages.LocateResult((answer,)), "", frozenset({23}))
    (finding,) = out.findings
    assert finding.span == Span(18, 28, 18, 39) and finding.code == "PLS304"
    assert finding.fix.title.startswith("verified: with this change the kernel matches the reference on 3 fresh")
    assert finding.fix.edits[0].new_text == "rows >= cols"
    assert finding.related[0] == Related(call, "tier 3 saw the outputs wrong here (output 0: 256 of 65536 elements off)")
    assert "line 19 makes them wrong" in finding.message and any("locate step" in n for n in out.notes)


def test_no_fix_found_moves_a_finding_at_the_call_to_the_most_suspicious_statement():
    call = Span(23, 4, 23, 30)
    tried = (_edit(19, "rows >= cols", "rows > cols"), _edit(17, "x", "y"))
    answer = messages.LocatedEntry("causal_scores", "not_found", "none", kernel="causal_scores_kernel",
                                   suspect=tried[1], tried=tried, tried_count=2)
    (finding,) = client_step.apply_located(_report(call), messages.LocateResult((answer,)), "",
                                           frozenset({23})).findings
    assert finding.span.line == 16 and finding.fix is None
    assert "tried 2 mechanical edit(s)" in finding.message and "most suspicious statement is line 17" in finding.message
    # a finding tier 3 already put at a statement of its own stays there
    (kept,) = client_step.apply_located(_report(Span(5, 4, 5, 9)), messages.LocateResult((answer,)), "",
                                        frozenset({23})).findings
    assert kept.span.line == 5 and "tried 2" in kept.message


def test_a_failed_locate_request_leaves_the_findings_and_says_so():
    import asyncio

    class Reply:
        status, message, result = "timed_out", "ran past 120 s", None

    async def request(params, timeout_s):
        assert params.entries == ("causal_scores",) and timeout_s > params.budget_s
        return Reply()

    report = _report(Span(23, 4, 23, 30))
    out = asyncio.run(client_step.locate_report(request, report, "", "v6e", 60.0))
    assert out.findings == report.findings and "stopped before it answered (ran past 120 s)" in out.notes[-1]


def test_nan_computed_from_memory_never_written_is_asked_about_with_the_init_edits_first():
    import asyncio

    from pallasite.analysis.types import NAN_COMPUTED

    computed = Finding(code="PLS303", message=f"output 0: 8 of 8 blocks come back NaN ...; {NAN_COMPUTED}: ...",
                       span=Span(30, 4, 30, 9), tier=3, kernel="k")
    unwritten = Finding(code="PLS303", message="output 0: 2 of 8 blocks come back NaN; no grid step writes these",
                        span=Span(30, 4, 30, 9), tier=3, kernel="k")
    wrong = client_step.WrongOutputs()
    wrong.add({"a": [computed], "b": [unwritten]})
    report = wrong.into(FileReport(path="k.py", findings=(computed, unwritten)))
    assert report.wrong_outputs == ("a", "b") and report.uninitialized == ("a",) and report.failed_at == (("a", 31), ("b", 31))
    asked = []

    async def request(params, timeout_s):
        asked.append(params)
        return None

    asyncio.run(client_step.locate_report(request, report, "", "v6e", 60.0))
    assert asked[0].uninitialized == ("a",)
    # the worker ranks a first step's init (and a pl.when condition) above the grid's cdiv for such NaN
    text = (DATA / "when_in_dispatched_helper.py").read_text()
    plain = locate_edits.candidate_edits(text, _call_line(text), None, 3, None, locate_edits.Signals(nan=True))
    told = locate_edits.candidate_edits(text, _call_line(text), None, 3, None,
                                        locate_edits.Signals(nan=True, uninitialized=True))
    assert plain[0].kind == "cdiv" and told[0].role == "when"
    text = (DATA / "init_missing.py").read_text()
    told = locate_edits.candidate_edits(text, _call_line(text), None, 3, None,
                                        locate_edits.Signals(nan=True, uninitialized=True))
    assert told[0].kind == "init"


# --------------------------------------------------------------------------- a run that fails: located too


RUNTIME = Path(__file__).parent / "data" / "runtime"


def _locate_file(path: Path, failed_line: int | None, entry: str, budget_s: float = 60) -> messages.LocatedEntry:
    from pallasite.runner.tier3.locate_step import handle_locate

    source = messages.Sources(messages.SourceFile(str(path), path.read_text()))
    params = messages.LocateParams(source=source, chip="v6e", budget_s=budget_s,
                                   failed_at=((entry, failed_line),) if failed_line else ())
    (answer,) = handle_locate(params).entries
    return answer


def test_a_deadlocked_wait_is_located_at_the_when_that_never_starts_its_copy():
    # tier 3 says PLS300 at the wait (line 21); the copy's start sits under `pl.when(i < 0)` (line 17)
    answer = _locate_file(RUNTIME / "dma_never_started.py", 21, "double")
    assert answer.state == "fixed", (answer.reason, answer.tried)
    assert answer.fix.line == 17 and answer.fix.old_text == "i < 0" and answer.verified_sets == 3
    assert answer.problem.startswith("the run deadlocks")


def test_without_a_reference_a_failure_is_located_but_never_called_verified(tmp_path):
    text = (RUNTIME / "dma_never_started.py").read_text()
    path = tmp_path / "no_reference.py"
    path.write_text(text.replace("def reference(x):\n    return x * 2.0\n", ""))
    assert "def reference" not in path.read_text()
    answer = _locate_file(path, 21, "double")
    assert answer.state == "fixed" and answer.fix.line == 17 and not answer.compared, (answer.reason, answer.tried)
    finding = Finding(code="PLS300", message="deadlock: the kernel waits", span=Span(20, 4, 20, 15), tier=3)
    moved = client_step.fixed_finding(finding, answer, answer.fix)
    assert moved.fix.title.startswith("runs without the error:") and "values are not checked" in moved.message
    assert not moved.fix.title.startswith("verified")


def test_a_read_past_a_scratch_is_located_at_the_declared_dim():
    answer = _locate_file(DATA / "scratch_one_slot.py", 17, "add_halves")
    assert answer.state == "fixed", (answer.reason, answer.tried)
    assert (answer.fix.line, answer.fix.old_text, answer.fix.new_text) == (28, "1", "2")
    assert "out of bounds" in answer.problem


def test_failure_edits_rank_by_the_kind_of_failure_and_where_tier_3_said_it():
    text = (DATA / "named_index_map.py").read_text()
    call = _call_line(text)
    block = locate_edits.candidate_edits(text, call, None, 2, None, locate_edits.Signals(failure="block",
                                                                                         failed_line=26))
    first = next(i for i, e in enumerate(block) if e.line == 18)  # the map named in a spec bound to a name
    assert block[first].kind == "index-map-order" and (block[first].old, block[first].new) == ("(j, i)", "(i, j)")
    assert first < 8 and all(e.role != "kernel" for e in block[:first]), [(e.line, e.what) for e in block[:first]]
    params = [e for e in block if e.what == "index map parameters `i, j` swapped"]
    assert 17 in {e.line for e in params}  # a def's parameters too (was: lambdas only)
    text = (RUNTIME / "dma_never_started.py").read_text()
    stuck = locate_edits.candidate_edits(text, _call_line(text), None, 1, None,
                                         locate_edits.Signals(failure="deadlock", failed_line=21))
    assert stuck[0].role == "when" and stuck[0].line == 17


def test_a_run_past_its_time_limit_ends_with_that_error():
    import time

    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    from pallasite.runner.tier3.interpret_deadlock import RunPastLimit
    from pallasite.runner.tier3.interpret_run import interpret_once

    def forever(x_ref, o_ref):  # an edited loop bound that never ends: the condition reads a ref each turn
        turns = jax.lax.while_loop(lambda n: x_ref[0, 0] > -1.0, lambda n: n + 1, 0)
        o_ref[...] = x_ref[...] + turns.astype(jnp.float32)

    def entry(x):
        return pl.pallas_call(forever, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    start = time.monotonic()
    run = interpret_once(entry, (jnp.ones((8, 128), jnp.float32),), cores=1, time_limit_s=2.0)
    assert isinstance(run.error, RunPastLimit) or "past its time limit" in str(run.error), run.error
    assert time.monotonic() - start < 60


def test_failures_are_asked_about_with_their_line_and_said_as_a_failing_run():
    failing = Finding(code="PLS302", message="Out-of-bounds read", span=Span(16, 4, 16, 10), tier=3, kernel="k")
    wrong = Finding(code="PLS304", message="output 0 differs", span=Span(30, 4, 30, 9), tier=3, kernel="k")
    warned = Finding(code="PLS302", message="x", span=Span(3, 0, 3, 1), tier=3, severity="warning")
    # a failure's line, else where tier 3 placed the wrong outputs (both rank the edits there first)
    assert client_step.wrong_output_entries({"a": [failing, wrong], "b": [wrong], "c": [warned]}) == {"a": 17, "b": 31}
    answer = messages.LocatedEntry("a", "fixed", kernel="k", fix=_edit(28, "2", "1"), verified_sets=3,
                                   shapes="float32[64, 128]", problem="the run reads or copies out of bounds")
    report = FileReport(path="k.py", findings=(failing,), wrong_outputs=("a",), failed_at=(("a", 17),))
    (moved,) = client_step.apply_located(report, messages.LocateResult((answer,)), "", frozenset({20})).findings
    assert moved.span.line == 27 and "makes the run fail" in moved.message and "runs without this error" in moved.message
    assert moved.related[0].message.startswith("tier 3 saw the run fail here")
    assert moved.fix.title.startswith("verified:")


# --------------------------------------------------------------------------- the command line


def test_check_locate_puts_the_finding_at_the_planted_line_with_the_verified_fix(tmp_path):
    path = tmp_path / "grid_no_cdiv.py"
    path.write_text((DATA / "grid_no_cdiv.py").read_text())
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", str(path), "--tiers", "0",
                           "--locate", "--no-store", "--format", "json"], capture_output=True, text=True,
                          timeout=280, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 1, proc.stderr[-2000:]
    (file,) = json.loads(proc.stdout)["files"]
    assert 3 in file["tiers_ran"]  # --locate adds tier 3
    (finding,) = [f for f in file["findings"] if f["code"] == "PLS303"]
    assert (finding["line"], finding["column"]) == (23, 15), finding
    assert finding["fix"]["title"].startswith("verified: with this change the kernel matches the reference on 3")
    assert finding["fix"]["edits"] == [{"line": 23, "column": 15, "end_line": 23, "end_column": 24,
                                        "new_text": "pl.cdiv(n, ROWS)"}]
    assert any(r["message"].startswith("tier 3 saw the outputs wrong here") for r in finding["related"])


def test_check_locate_edits_the_call_tier_3_placed_the_failure_at_not_the_task_s_first(tmp_path):
    """A task of two pallas_calls whose second declares its output int32 (sglang-jax's simple GLA and axlearn's
    flash attention in corpus v3): the edits were all of the first call's statements, so the dtype's was never
    tried and no fix verified; the call whose out_shape holds the line tier 3 placed the finding at is edited now."""
    path = tmp_path / "dtype_second_call.py"
    path.write_text((Path(__file__).parent / "data" / "declarations" / "dtype_second_call.py").read_text())
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", str(path), "--tiers", "0-3",
                           "--locate", "--no-store", "--format", "json"], capture_output=True, text=True,
                          timeout=280, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    (file,) = json.loads(proc.stdout)["files"]
    (finding,) = [f for f in file["findings"] if f["code"] == "PLS304"]
    assert finding["line"] == 28, finding
    assert finding["fix"]["title"].startswith("verified:"), finding
    assert finding["fix"]["edits"][0]["line"] == 28 and finding["fix"]["edits"][0]["new_text"] == "jnp.float32"


# --------------------------------------------------------------------------- tests that can see the bug


def test_the_shrink_plan_gives_each_size_its_own_extent_and_keeps_a_partial_block():
    from pallasite.runner.tier3.interpret_distinct import shrink_plan

    plan = shrink_plan({4096: {128}, 2048: {128}}, {}, set(), distinct=True)
    assert plan[4096][0] != plan[2048][0]  # two sizes, two extents (both were 256 before)
    assert {plan[4096][0], plan[2048][0]} == {256, 512}
    assert shrink_plan({4096: {128}, 2048: {128}}, {}, set()) == {4096: (256, 128), 2048: (256, 128)}  # as before
    tailed = shrink_plan({}, {1000: {128}}, set(), distinct=True)
    assert tailed[1000] == (128 + 1000 % 128, 128)  # the partial last block kept (was: not shrunk); 7 blocks: 1 kept
    assert shrink_plan({}, {1064: {128}}, set(), distinct=True)[1064] == (2 * 128 + 1064 % 128, 128)


def _tier3(path: Path, text: str | None = None) -> dict:
    from pallasite.runner.tasks import tasks_runtime
    from pallasite.runner.tier3.interpret import run_tier3
    from pallasite.runner.loader import user_module

    text = text if text is not None else path.read_text()
    with user_module(str(path), text) as module:
        (task,) = tasks_runtime.discover(module, str(path), text)
        return run_tier3(task, str(path), text, target="v6e")


@pytest.mark.parametrize("name, bug, fix, code", [
    ("square_hides_grid", "m // BN", "n // BN", "PLS303"),  # a grid dim from the wrong axis: square hides it
    pytest.param("tail_mask_off", "cols <= n", "cols < n", "PLS304",  # a tail mask off by one: multiples hide it
                 marks=pytest.mark.pipeline),
])
def test_reduced_inputs_show_what_square_or_whole_block_shapes_hide(name, bug, fix, code, tmp_path):
    path = DATA / f"{name}.py"
    found = _tier3(path)
    assert found["state"] == "error" and found["shrunk"], found
    assert code in {r["code"] for r in found["errors"]}
    shape = [int(d) for d in found["shapes"].split("[")[1].split("]")[0].split(",")]
    assert shape[0] != shape[1]
    correct = tmp_path / f"{name}.py"
    correct.write_text(path.read_text().replace(bug, fix))
    fine = _tier3(correct)
    assert fine["state"] == "ok", fine["errors"]  # and no false error on the correct kernel at those shapes


def test_inputs_the_reference_never_reads_are_poisoned_and_show_a_mask_off_by_one(tmp_path):
    from pallasite.runner.tier3.interpret_poison import poison_for

    import jax.numpy as jnp
    import numpy as np

    path = DATA / "length_mask_off.py"
    found = _tier3(path)  # with random inputs alone the extra key moves the output under the tolerance
    (rec,) = [r for r in found["errors"] if r["code"] == "PLS304"]
    assert "never read by the reference" in rec["sentence"] and found["state"] == "error"
    correct = tmp_path / "length_mask_off.py"
    correct.write_text(path.read_text().replace("col <= lengths_ref[b]", "col < lengths_ref[b]"))
    assert _tier3(correct)["state"] == "ok"  # the poison never touches what the correct kernel reads

    lengths = jnp.asarray(np.array([3, 5], np.int32))
    x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 8)).astype(np.float32))
    poison = poison_for(lambda n, x: jnp.where(jnp.arange(8)[None] < n[:, None], x, 0.0).sum(1), (lengths, x))
    assert poison is not None and poison.masks[1].sum() == 8 and poison.masks[1][0].tolist() == [False] * 3 + [True] * 5
    # a max has zero gradients on elements it reads: never poisoned (checked by running the reference again)
    assert poison_for(lambda x: jnp.max(x, axis=1), (x,)) is None


def test_the_poison_is_finite_and_a_failing_reference_poisons_nothing():
    from pallasite.runner.tier3.interpret_poison import poison_for

    import jax.numpy as jnp
    import numpy as np

    lengths = jnp.asarray(np.array([3, 5], np.int32))
    x = jnp.asarray(np.array([[1.0, 2.0, np.inf, 0, 0, 0, 0, 0], [0, 1, 2, 3, 4, 5, 6, 7]], np.float32))
    masked_sum = lambda n, x: jnp.where(jnp.arange(8)[None] < n[:, None], x, 0.0).sum(1)  # noqa: E731
    poison = poison_for(masked_sum, (lengths, x))
    assert poison is not None and np.isfinite(poison.values[1]) and poison.values[1] == 8.0 * 7.0

    def broken(n, x):
        raise RuntimeError("the reference fails")

    assert poison_for(broken, (lengths, x)) is None
    assert poison_for(lambda n, x: n * 2, (lengths, x)) is None  # integer outputs only: nothing to differentiate


def test_a_missing_first_step_init_is_inserted_and_verified():
    from pallasite.runner.tier3.locate_step import handle_locate

    path = DATA / "init_missing.py"
    text = path.read_text()
    edits = locate_edits.candidate_edits(text, _call_line(text), None, 2, None, locate_edits.Signals(nan=True))
    (init,) = [e for e in edits if e.kind == "init" and e.new.startswith("l_ref[...] = jnp.zeros_like(l_ref)\n")]
    assert init.line == 19 and locate_edits.apply(text, init).count("\n") == text.count("\n") + 1
    assert not [e for e in edits if e.kind == "init" and e.new.startswith("m_ref")]  # the block writes m_ref
    source = messages.Sources(messages.SourceFile(str(path), text))
    (answer,) = handle_locate(messages.LocateParams(source=source, chip="v6e", budget_s=120)).entries
    assert answer.state == "fixed" and answer.fix.line == 19 and answer.verified_sets == 3, (answer.reason, answer.tried)


def test_a_missing_init_writes_the_slot_the_blocks_own_inits_write_and_is_verified():
    from pallasite.runner.tier3.locate_step import handle_locate

    path = DATA / "init_missing_slot.py"
    text = path.read_text()
    edits = locate_edits.candidate_edits(text, _call_line(text), None, 2, None,
                                         locate_edits.Signals(nan=True, uninitialized=True))
    inits = [e.new.split("\n")[0] for e in edits if e.kind == "init"]
    assert inits[:2] == ["acc_ref[h] = jnp.zeros_like(acc_ref[h])", "acc_ref[...] = jnp.zeros_like(acc_ref)"]
    source = messages.Sources(messages.SourceFile(str(path), text))
    (answer,) = handle_locate(messages.LocateParams(source=source, chip="v6e", budget_s=120,
                                                    uninitialized=("head_logsumexp",))).entries
    assert answer.state == "fixed" and answer.fix.line == 23, (answer.reason, answer.tried)
    assert answer.fix.new_text.startswith("acc_ref[h] = jnp.zeros_like(acc_ref[h])\n")


def test_a_fix_for_a_finding_tier_0_already_placed_is_hosted_by_it():
    # tier 3's NaN was folded into tier 0's PLS018 at the first-step block (line 17): the verified fix joins it
    from pallasite.engine.findings.agreement import agreement_message

    nan = Finding(code="PLS303", message="output 0: 4 of 4 blocks come back NaN", span=Span(22, 4, 22, 30), tier=3,
                  origin="TPU interpreter")
    uninit = Finding(code="PLS018", message="Scratch ref l_ref is read here on the first grid step.", tier=0,
                     span=Span(16, 4, 16, 20), kernel="row_logsumexp_kernel",
                     related=(Related(nan.span, agreement_message(nan, "PLS018")),))  # as merge_agreeing folds it
    nearby = Finding(code="PLS010", message="a block entry off the tiling", tier=0, span=Span(18, 4, 18, 9))
    answer = messages.LocatedEntry("row_logsumexp", "fixed", kernel="row_logsumexp_kernel", verified_sets=3,
                                   fix=messages.SourceEdit(19, 8, 19, 51, "l_ref[...] = 0\n        m_ref[...] = m",
                                                           "m_ref[...] = m", "`l_ref` initialized", "init"),
                                   shapes="float32[32, 512]", problem="output 0: NaN")
    report = FileReport(path="k.py", findings=(uninit, nearby), wrong_outputs=("row_logsumexp",))
    hosted, other = client_step.apply_located(report, messages.LocateResult((answer,)), "", frozenset({35})).findings
    assert other == nearby  # nearer the edit, but tier 3's finding was not folded into it
    assert hosted.span == uninit.span and hosted.code == "PLS018"
    assert hosted.fix.title.startswith("verified:") and "with `l_ref` initialized" in hosted.message


def test_fresh_input_sets_keep_the_scale_and_sign_of_the_tasks_own_values():
    """The sets a fix is verified on are drawn like the task's own inputs: a log decay drawn in [-0.1, -0.01]
    stays negative and small (at N(0, 1) simple GLA's recurrent state grew past float32, and no edit verified,
    not even the file as it was); integer tables are kept; every float is drawn anew."""
    import jax.numpy as jnp
    import numpy as np

    from pallasite.runner.tier3.locate_step import fresh_inputs

    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.normal(size=(16, 128)) * 0.1, jnp.float32)
    gamma = jnp.asarray(rng.uniform(-0.1, -0.01, size=(64,)), jnp.float32)
    table = jnp.arange(8, dtype=jnp.int32)
    got_q, (got_gamma, got_table), scale = fresh_inputs((q, (gamma, table), 0.5), seed=1)
    assert got_table is table and scale == 0.5
    assert bool(jnp.all(got_gamma < 0)) and float(jnp.abs(got_gamma).max()) < 0.5
    assert 0.05 < float(got_q.std()) < 0.2 and not bool(jnp.any(got_q == q))
    again = fresh_inputs((q, (gamma, table), 0.5), seed=2)
    assert not bool(jnp.any(again[0] == got_q))


def test_a_fresh_set_missed_by_a_hair_counts_and_is_said_so():
    """The unedited jax paged attention misses 1 and 5 of 1,024 elements on two of three fresh sets, each within
    twice its tolerance: the right edit of its inverted init was "not found" until such a set counted (said in
    the fix's title); a miss by more, or in more than 1% of the elements, or a NaN, still fails."""
    import numpy as np

    from pallasite.runner.tier3.interpret_compare import compare
    from pallasite.runner.tier3.locate_step import hair_miss

    expected = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    tol = (0.02, 0.02)

    def miss(count: int, factor: float, nan: bool = False) -> bool:
        out = expected.copy()
        out[:count] += factor * (0.02 + 0.02 * np.abs(expected[:count]))
        if nan:
            out[-1] = np.nan
        found = compare(out, expected, tol)
        return hair_miss(found, out, expected, tol, out.size)

    assert miss(5, 1.5) and miss(1, 1.9)
    assert not miss(5, 3.0) and not miss(20, 1.5) and not miss(0, 0.0) and not miss(5, 1.5, nan=True)
    answer = messages.LocatedEntry("e", "fixed", fix=messages.SourceEdit(3, 4, 3, 9, "i == 0", "i != 0", "`i != 0` -> `i == 0`"),
                                   verified_sets=3, edge_sets=2, shapes="float32[8]")
    finding = Finding(code="PLS304", severity="error", message="wrong.", span=Span(2, 0, 2, 5), tier=3)
    _told, fix = client_step._verified_edit(finding, answer, answer.fix)
    assert fix.title.startswith("verified: with this change the kernel matches the reference on 3 fresh input sets, "
                                "2 of them within twice the tolerance (a few elements past it)"), fix.title


def test_edits_at_the_line_tier_3_placed_wrong_outputs_at_are_tried_first():
    """jax's flash attention with a reduction axis marked "parallel" (v5p): tier 3 said so at the
    dimension_semantics entry, and the locate step ran out of its 60 s among 17 other edits before the one at
    that entry; the line tier 3 placed the wrong outputs at now ranks the edits there first, as a failure's does."""
    from pallasite.runner.tier3.locate_step import signals

    problems = [{"kind": "mismatch", "index": 0, "count": 196585, "size": 262144}]
    edits = [locate_edits.Edit(10, 0, 10, 5, "i != 0", "i == 0", "when", "when", "a when negated"),
             locate_edits.Edit(20, 0, 20, 9, '"arbitrary"', '"parallel"', "semantics", "semantics", "an axis")]
    assert locate_edits.order_edits(edits, signals(problems))[0].kind == "when"
    assert locate_edits.order_edits(edits, signals(problems, line=20))[0].kind == "semantics"


def test_a_fresh_set_served_from_jax_trace_cache_still_verifies(monkeypatch):
    """jax's flash attention jits its kernel's caller: the fresh sets, of the first run's shapes, come from jax's
    trace cache and record no pallas_call, which read as "the edit ran no kernel" - its right edit (the
    reduction axis made "arbitrary") was never verified. The edited module's first run records the call."""
    from types import SimpleNamespace

    import numpy as np

    from pallasite.runner.tier3 import locate_step as step_mod
    from pallasite.runner.tier3.interpret_run import Run

    reference = lambda x: x * 2.0  # noqa: E731
    monkeypatch.setattr(step_mod, "interpret_once",
                        lambda fn, inputs, **kw: Run(outputs=reference(*inputs), calls=[]))  # a cache hit: no call
    x = np.linspace(-1.0, 1.0, 256, dtype=np.float32).reshape(16, 16)
    task = SimpleNamespace(name="t", entry=reference, reference=reference)
    base = SimpleNamespace(inputs=(x,), poison=None, expected=reference(x), run=SimpleNamespace(seconds=0.1),
                           run_kw={}, tolerance=(1e-5, 1e-5))
    step = step_mod.Step.__new__(step_mod.Step)
    step.task, step.path, step.deadline = task, "k.py", float("inf")
    step.params = SimpleNamespace(fresh_sets=3)
    assert step._verified(task, base) == (3, 0)

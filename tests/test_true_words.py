"""True words (issue 42): what was not checked says "not checked", a candidate without a pallas_call says
"no pallas_call", a SparseCore kernel the compiler passes for 7x is compiled, the editor's kernel hover says
what `pallasite check` says for the same file, and "not shown" (None) stays None from the Verdict to the
last renderer (eval rows, the eval text table, the HTML reports), never False and never cut short."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.uris import from_fs_path

from pallasite.analysis.verdict import CompileResult, JudgedBy, TestResult, Timing, Verdict, COST_MODEL
from test_lsp import answer_trust, client, initialize, open_doc  # noqa: F401  (client is a fixture)

DATA = Path(__file__).parent / "data" / "true_words"
ROOT = Path(__file__).parent.parent


def check_json(path: Path, target: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "check", "--no-store", str(path),
                           "--target", target, "--format", "json"], capture_output=True, text=True, timeout=240)
    assert proc.stdout, proc.stderr[-3000:]
    (entry,) = json.loads(proc.stdout)["files"]
    return entry


@pytest.mark.parametrize("name, why", [
    ("no_pallas_call", "no pallas_call: neither the file nor its task makes one"),
    ("unreached_kernel", "no pallas_call: the task reaches none of the file's kernels"),
])
def test_a_candidate_without_a_pallas_call_is_said_no_pallas_call(name, why):
    """It was "not compiled for the chip: scale_add: tier 0 not run for v5e (compiled means every tier
    passed) (tiers 1,2 passed)": the entry that made no pallas_call was taken for a kernel tier 0 never saw."""
    entry = check_json(DATA / f"{name}.py", "v5e")
    assert entry["compile"]["ok"] is False and entry["compile"]["status"] == "not compiled", entry["compile"]
    assert entry["compile"]["why"] == why
    assert entry["compile_text"] == f"not compiled for v5e: {why}"
    assert not any(k["name"] == "scale_add" for k in entry["kernels"])  # the entry is not a kernel


def test_a_sparsecore_kernel_that_passes_tiers_1_and_2_for_7x_is_compiled():
    """pl.kernel over a VectorSubcoreMesh makes its kernel without a pallas_call in the file, so tier 0 has no
    site for it; it was refused as "not compiled for the chip: sc_add: tier 0 not run for 7x"."""
    pytest.importorskip("libtpu")  # tier 2 is libtpu's compile for the chip
    entry = check_json(DATA / "sparsecore_add.py", "7x")
    (kernel,) = entry["kernels"]
    assert kernel["tiers"]["1"] == "ok" and kernel["tiers"]["2"] == "ok", kernel
    assert entry["compile"]["ok"] is True and entry["compile_text"] == "compiled for 7x (tiers 0,1,2)", entry
    assert entry["not_fully_checked"] == []


class _TimedOnly:
    """The search's evaluator, as far as the root goes: the root is only measured."""

    method = f"estimate ({COST_MODEL}, v5e)"
    fix = tune = frozen_tests = None

    async def measure(self, source):
        from pallasite.agents.optimize import PhaseResult

        return PhaseResult(True, "timed", timing=Timing(1e-3, "estimate", "v5e", COST_MODEL))


def test_a_search_root_that_was_never_checked_says_not_checked():
    """The root (timed, never compiled or tested by the search) carried a Verdict whose status was "not
    compiled for the chip" in the node JSON and the HTML report's data."""
    from pallasite.agents.search import SearchOptions, search
    from pallasite.agents.search_iterate import IterateNodes
    from pallasite.server.reports.report_html import search_html

    from pallasite.agents.llm.providers import ProviderConfig
    from pallasite.agents.llm.providers_scripted import ScriptedProvider

    provider = ScriptedProvider(ProviderConfig(name="scripted"), [])  # the one node gets no answer: a model error
    nodes = IterateNodes(provider, _TimedOnly(), "k.py", "v5e")
    graph = asyncio.run(search("X = 1\n", SearchOptions(algo="parallel", trajectories=1, iterations=1, max_nodes=1),
                               None, nodes.evaluate_root, provenance=_TimedOnly.method, attempt=nodes.attempt))
    root = graph.to_json()["nodes"][0]
    assert root["verdict"]["status"] == "not checked" and root["verdict"]["compiled"] is None
    assert root["verdict"]["compile"]["checked"] is False and root["verdict"]["text"] == "not checked"
    assert "not compiled" not in json.dumps(root)
    assert "not compiled" not in search_html(graph.to_json())


def test_a_stopped_check_is_not_checked_and_a_skipped_tier_2_is_not_for_the_chip():
    """Tri-state kept apart: a crash or a limit stopped the check ("not checked"); tier 2 did not run ("not
    compiled for the chip"); both are None (not shown), never a pass and never "not compiled"."""
    from pallasite.analysis.types import FileReport, Finding, KernelVerdict, Span
    from pallasite.analysis.verdict import compile_result

    kernel = KernelVerdict("k", Span.point(1), ((0, "ok"), (1, "ok"), (2, "skipped: libtpu not installed")))
    skipped = compile_result(FileReport("k.py", (), (kernel,)), (0, 1, 2), "v5e")
    crash = Finding("PLS902", "the worker crashed", Span.point(3), "warning", tier=1, origin="pallasite runner")
    stopped = compile_result(FileReport("k.py", (crash,), (kernel,)), (0, 1, 2), "v5e")
    assert (skipped.ok, skipped.status()) == (None, "not compiled for the chip")
    assert (stopped.ok, stopped.status()) == (None, "not checked")
    assert stopped.text().startswith("not checked: the worker crashed")
    assert Verdict(stopped, TestResult.ok()).status() == "not checked"
    assert CompileResult.from_json(json.loads(json.dumps(stopped.to_json()))) == stopped


def _summary(cases: dict[str, Verdict]) -> dict:
    from pallasite.agents.eval_metrics import CaseOutcome, TaskOutcome, summarize

    return summarize("files", [TaskOutcome(task, (CaseOutcome(v, 1.5 if v.passed else None),))
                               for task, v in cases.items()], provenance="estimate (v5e)").to_json()


def test_eval_rows_keep_not_shown_as_none_to_the_html_and_the_text_table():
    """Eval rows turned "not shown" (None) into False, the HTML then said "no", and the text table cut
    "not compiled for the chip" to "not compiled"."""
    from pallasite.server.commands.cmd_eval import side_by_side
    from pallasite.server.reports.report_html import eval_html

    passed, judge = CompileResult.passed("v5e"), JudgedBy.JUDGE  # as the judge says them (only its pass is correct)
    cases = {"for_chip": Verdict(CompileResult.passed("v5e", (0, 1)), TestResult.ok(), judged_by=judge),
             "unverified": Verdict(passed, TestResult.not_verified("the worker crashed"), judged_by=judge),
             "wrong": Verdict(passed, TestResult.wrong("max abs error 1.0"), judged_by=judge),
             "correct": Verdict(passed, TestResult.ok(), judged_by=judge)}
    summary = _summary(cases)
    rows = {t["task"]: t for t in summary["per_task"]}
    assert {k: (r["compiled"], r["correct"], r["status"]) for k, r in rows.items()} == {
        "for_chip": (None, None, "not compiled for the chip"),
        "unverified": (True, None, "compiled, not verified"),
        "wrong": (True, False, "compiled, wrong"),
        "correct": (True, True, "compiled, correct")}
    assert summary["compile_rate"] == 3 / 4 and summary["correct_rate"] == 1 / 4
    page = eval_html([summary])
    for task, compiled, correct in (("for_chip", "not for the chip", "not for the chip"),
                                    ("unverified", "yes", "not verified"), ("wrong", "yes", "no")):
        assert f"<td>{task}</td><td>{rows[task]['status']}</td><td>{compiled}</td><td>{correct}</td>" in page, task
    other = dict(summary, method="other")
    table = side_by_side([summary, other]).splitlines()
    for task, status in (("for_chip", "not compiled for the chip"), ("unverified", "compiled, not verified")):
        (line,) = [row for row in table if row.startswith(task)]
        assert line.split()[1:] == status.split() * 2, line


def test_a_task_that_was_not_checked_is_not_checked_in_its_row_and_cells():
    from pallasite.server.reports.report_html import eval_html

    summary = _summary({"unchecked": Verdict(CompileResult.not_checked("the check ran past 180 s"), TestResult.ok())})
    (row,) = summary["per_task"]
    assert (row["compiled"], row["correct"], row["status"]) == (None, None, "not checked")
    assert "<td>unchecked</td><td>not checked</td><td>not checked</td><td>not checked</td>" in eval_html([summary])


@pytest.mark.pipeline
def test_eval_cli_rows_say_not_verified_as_none(tmp_path):
    """`pallasite eval --no-verify`: the candidate's row said "correct": false for a test that never ran."""
    out = tmp_path / "eval.json"
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "eval", str(ROOT / "tests" / "data" / "eval"),
                           "--target", "v5e", "--no-verify", "--json", str(out)], capture_output=True, text=True,
                          timeout=280)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {t["task"]: t for t in json.loads(out.read_text())["methods"][0]["per_task"]}
    tuned = rows["add_tuned"]
    assert tuned["status"] == "compiled, not verified" and tuned["correct"] is None, tuned
    assert rows["scale_reference_only"]["correct"] is False  # no candidate: failed, not "not shown"
    assert "compiled, not verified" in proc.stdout  # the text table says the status in full


@pytest.mark.pipeline
async def test_the_kernel_hover_says_what_check_says_for_the_same_file(client, tmp_path):
    """Hovering add_kernel in examples/add.py said "not compiled for v6e: add_kernel: tier 0 not run" while
    `pallasite check` said "compiled for v6e (tiers 0,1,2)": the editor's check runs the compiler tiers
    only (tier 0 runs on every edit), and the hover judged that report as if tier 0 had not run."""
    folder = tmp_path / "ws"
    folder.mkdir()
    path = folder / "add.py"
    shutil.copy(ROOT / "examples" / "add.py", path)
    said = (await asyncio.to_thread(check_json, path, "v6e"))["compile_text"]
    answer_trust(client, "Trust")
    await initialize(client, folder, {})
    uri = from_fs_path(str(path))
    open_doc(client, uri, path.read_text())
    line = path.read_text().splitlines().index("def add_kernel(x_ref, y_ref, o_ref):")

    async def hover_after_the_check() -> str:
        while True:
            shown = await client.text_document_hover_async(lsp.HoverParams(lsp.TextDocumentIdentifier(uri),
                                                                           lsp.Position(line, 5)))
            if shown is not None and "The file at the last check" in shown.contents.value:
                return shown.contents.value
            await asyncio.sleep(0.2)

    text = await asyncio.wait_for(hover_after_the_check(), 180)
    assert f"The file at the last check: **{said}**" in text, (said, text)


def test_tune_reads_its_test_as_data_never_from_the_reason_words():
    """Tune built its test result by matching the start of reason strings ("the interpret run failed: ..." read as
    not verified); now each configuration's test is the judge's ``TestResult`` as data, whatever its words."""
    from pallasite.analysis.types import CostEstimate
    from pallasite.engine.tuning.tune import TuneOptions, tune
    from pallasite.runner.tune_ops import chip_spec
    from pallasite.wire.messages import EstimateResult

    async def estimator(configs, kinds):
        return EstimateResult("add", chip_spec("v5e", probe=False), tuple(
            CostEstimate(chip="v5e", config=(), status="ok", seconds=1e-6, bound="memory", model=COST_MODEL)
            for _ in configs or [{}]))

    async def compiled(text):
        return CompileResult.passed("v5e")

    def verdict(test: TestResult) -> Verdict:
        async def tester(text):
            return test
        report = asyncio.run(tune("k.py", "def add(x):\n    return x\n", TuneOptions(chip="v5e", verify=1), estimator,
                                  compiler=compiled, tester=tester))
        return report.verdict(report.walk.steps[0].config)

    found = verdict(TestResult.wrong("the interpret run failed: out[3] is NaN (a finding)"))
    assert found.status() == "compiled, wrong" and "out[3] is NaN" in found.text()
    raised = verdict(TestResult.not_verified("wrong_result: the test could not finish"))
    assert raised.status() == "compiled, not verified" and raised.correct is None
    assert verdict(TestResult.ok()).status() == "compiled, correct"


def test_a_search_root_stored_before_not_checked_had_its_word_reads_not_checked():
    """A search graph stored by the last release kept the root's compile part as {"ok": null, "why": "not
    checked", ...} without "checked": read back, it said "not compiled for the chip"."""
    from pallasite.agents.search_graph import SearchNode

    old = Verdict(timing=Timing(1e-3, "estimate", "v5e", COST_MODEL)).to_json()
    del old["compile"]["checked"], old["compile"]["status"]
    node = {"id": "root", "parents": [], "depth": 0, "op": "root", "strategy": None, "source": "x", "plan": "",
            "verdict": old, "speedup": 1.0, "provenance": f"estimate ({COST_MODEL}, v5e)", "error": ""}
    assert SearchNode.from_json(node).verdict.status() == "not checked"
    checked = CompileResult.from_json({"ok": None, "chip": "v5e", "tiers_run": [0, 1], "why": "tier 2 was not run"})
    assert checked.status() == "not compiled for the chip"


@pytest.mark.pipeline
def test_optimize_says_no_pallas_call_for_a_candidate_that_dropped_the_kernel(tmp_path):
    """Issue 42's words, through `pallasite optimize`: the model's candidate keeps the task (PALLASITE_ENTRY,
    inputs, reference) and computes in plain jnp; it was "not compiled for the chip: scale_add: tier 0 not
    run for v5e (compiled means every tier passed) (tiers 1,2 passed)"."""
    shutil.copy(DATA / "scale_add.py", tmp_path / "scale_add.py")
    (tmp_path / "pyproject.toml").write_text('[tool.pallasite]\ntarget = "v5e"\n')
    candidate = (DATA / "no_pallas_call.py").read_text()
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["Drop the kernel\nplain jnp is enough.", f"```python\n{candidate}```"]))
    done = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "optimize", "scale_add.py", "--provider",
                           "scripted", "--scripted-file", str(replies), "--max-iterations", "1", "--format", "json"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    (row,) = json.loads(done.stdout)["table"]
    assert row["status"] == "not compiled" and row["compiled"] is False, done.stderr[-2000:]
    assert row["verdict_text"] == "not compiled: no pallas_call: neither the file nor its task makes one"
    assert "tier 0 not run" not in done.stderr

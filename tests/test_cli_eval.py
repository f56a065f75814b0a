"""`pallasite eval DIR` over JAXBench/MaxKernel folders as they are, and the task discovery under it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pallasite.analysis.types import CostEstimate
from pallasite.analysis.verdict import MixedModels, estimated_speedup
from pallasite.engine.estimates import pair
from pallasite.engine.eval_tasks import discover

DATA = Path(__file__).parent / "data"


def test_discover_reads_jaxbench_and_maxkernel_folders(tmp_path):
    shutil.copytree(DATA / "eval", tmp_path / "eval")
    shutil.copytree(DATA / "maxkernel" / "softmax_task", tmp_path / "eval" / "softmax_task")
    tasks = {t.name: t for t in discover(str(tmp_path / "eval"))}
    assert sorted(tasks) == ["add_tuned", "scale_reference_only", "softmax_task"]
    assert tasks["add_tuned"].layout == "jaxbench" and tasks["add_tuned"].candidate_path.endswith("optimized.py")
    assert tasks["scale_reference_only"].candidate_path is None
    assert tasks["softmax_task"].layout == "maxkernel"
    assert tasks["softmax_task"].reference_path.endswith("reference.py")
    assert tasks["softmax_task"].candidate_path.endswith("kernel.py")


def test_discover_says_what_a_task_folder_is(tmp_path):
    with pytest.raises(ValueError, match="no task folders found.*baseline.py.*kernel_task.yaml"):
        discover(str(tmp_path))
    with pytest.raises(ValueError, match="no such folder"):
        discover(str(tmp_path / "missing"))


def test_the_reference_is_never_xlas_optimal_seconds_and_never_another_models():
    est = CostEstimate(chip="v5e", config=(), status="ok", seconds=4e-6, model="pallasite roofline v4")
    ok = pair(est, {"seconds": 2e-5, "model": "pallasite roofline v4", "chip": "v5e"}, "v5e")
    assert ok.speedup == pytest.approx(5.0) and ok.label == "estimate (pallasite roofline v4, v5e)"
    # XLA's optimal_seconds alone (the old reference) is another model's figure: no speedup
    xla_only = pair(est, {"optimal_seconds": 2e-5, "flops": 1.0}, "v5e")
    assert xla_only.speedup is None and "different" not in (xla_only.why or "") and "no estimate" in xla_only.why
    other = pair(est, {"seconds": 2e-5, "model": "some other roofline", "chip": "v5e"}, "v5e")
    assert other.speedup is None and "a speedup divides two figures of one model" in other.why
    assert pair(est, {"error": "ValueError: boom"}, "v5e").why.endswith("ValueError: boom")
    failed = CostEstimate(chip="v5e", config=(), status="trace_error", error="no estimate: dynamic grid")
    assert pair(failed, {"seconds": 1.0, "model": "pallasite roofline v4"}, "v5e").why.endswith("dynamic grid")


def test_estimated_speedup_refuses_two_models_and_non_positive_times():
    assert estimated_speedup(2.0, 1.0, "m, v5e", "m, v5e") == 2.0
    with pytest.raises(MixedModels, match="one model"):
        estimated_speedup(2.0, 1.0, "m, v5e", "m, v6e")
    with pytest.raises(MixedModels):
        estimated_speedup(2.0, 1.0, "", "")
    with pytest.raises(ValueError, match="positive"):
        estimated_speedup(0.0, 1.0, "m", "m")


@pytest.mark.pipeline
def test_eval_cli_scores_a_folder_with_labelled_estimates(tmp_path):
    """Issue 23: the reference-only task is "no candidate" (failed), never compiled-and-correct at 1.0x;
    issue 25: the candidate and its reference are estimated by one model, so the speedup is theirs."""
    out = tmp_path / "eval.json"
    report = tmp_path / "eval.html"
    proc = subprocess.run([sys.executable, "-m", "pallasite.server.cli", "eval", str(DATA / "eval"), "--target", "v5e",
                           "--json", str(out), "--report", str(report)], capture_output=True, text=True, timeout=280,
                          cwd=tmp_path)  # its results store there (an eval resumes from the one it finds)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "2 tasks, 1 with a candidate" in proc.stdout and "pallasite roofline v5, v5e" in proc.stdout
    assert "1/2 add_tuned" in proc.stderr  # progress
    (summary,) = json.loads(out.read_text())["methods"]
    rows = {t["task"]: t for t in summary["per_task"]}
    tuned, ref = rows["add_tuned"], rows["scale_reference_only"]
    assert tuned["compiled"] and tuned["correct"] and tuned["speedup"] > 0
    assert tuned["verdict"]["timing"]["model"] == "pallasite roofline v5"
    assert tuned["provenance"].startswith("estimate (pallasite roofline v5, v5e)")
    assert ref["status"] == "no candidate" and not ref["compiled"] and not ref["correct"] and ref["scored"] == 1.0
    assert summary["compile_rate"] == 0.5 and summary["correct_rate"] == 0.5 and summary["with_candidate"] == 1
    assert summary["geomean_speedup"] == pytest.approx((max(tuned["speedup"], 1.0) * 1.0) ** 0.5)
    assert 'data-plot="fast_p"' in report.read_text()


@pytest.mark.pipeline
def test_eval_compiled_means_the_tpu_compiler_and_correct_means_the_guarded_test(tmp_path):
    """A 12-row-block kernel (the cost model traces it, interpret mode runs it) is not compiled for the
    TPU; a candidate whose output is the reference's is not correct; --no-verify is never correct."""
    import asyncio

    from pallasite.agents.eval_job import EvalJob, run_eval
    from pallasite.engine.eval_tasks import discover
    from pallasite.server.commands.cmd_eval import candidate_for

    tasks = discover(str(DATA / "eval_verdicts"))
    (summary,) = asyncio.run(run_eval(EvalJob(tasks, {"files": candidate_for("files")}, chip="v5e")))
    rows = {t["task"]: t for t in summary["per_task"]}
    blocks, cheat = rows["add_12row_blocks"], rows["add_calls_reference"]
    assert not blocks["compiled"] and not blocks["correct"] and "divisible by 8" in blocks["verdict"]["evidence"]
    # the judge reads it from the TPU program: the kernel's output is unused, so the program launches none
    assert cheat["compiled"] and not cheat["correct"] and "no_pallas_call" in cheat["verdict"]["evidence"]
    # a wrong candidate keeps its estimate pair (the eval skipped estimating it before), never a speedup
    assert cheat["verdict"]["timing"]["seconds"] > 0 and cheat["speedup"] is None, cheat
    # the pair: one model (each side's method adds the term that bounds it and its factors)
    assert cheat["reference"]["label"] == cheat["verdict"]["timing"]["label"]
    assert cheat["reference"]["model"] == cheat["verdict"]["timing"]["model"]
    assert "-bound" in cheat["verdict"]["timing"]["method"] and "factors:" in cheat["reference"]["method"]
    assert summary["compile_rate"] == 0.5 and summary["correct_rate"] == 0.0
    (unverified,) = asyncio.run(run_eval(EvalJob([t for t in tasks if t.name == "add_calls_reference"],
                                                 {"files": candidate_for("files")}, chip="v5e", verify=False)))
    # not verified is not "not correct" (the status said so before; the verdict never did)
    assert unverified["correct_rate"] == 0.0 and \
        unverified["per_task"][0]["status"] == "compiled, not verified"
    assert unverified["per_task"][0]["verdict"]["status"] == "compiled, not verified"


def test_compiled_needs_every_reached_kernel_to_pass_every_tier():
    from types import SimpleNamespace

    from pallasite.analysis.verdict import compile_result as compiled_verdict

    def report(*kernels):
        return SimpleNamespace(findings=(), skipped=None, kernels=tuple(
            SimpleNamespace(name=n, tiers=tuple(t.items())) for n, t in kernels))

    fwd = ("fwd", {0: "ok", 1: "ok", 2: "ok"})
    bwd_unreached = ("bwd", {0: "ok", 1: "not reached: the task never calls this kernel", 2: "not reached: ..."})
    assert compiled_verdict(report(fwd, bwd_unreached), (0, 1, 2), "v5e").ok is True
    skipped = compiled_verdict(report(("fwd", {0: "ok", 1: "ok", 2: "skipped: libtpu not installed"})), (0, 1, 2), "v5e")
    assert skipped.ok is None and skipped.text() == "not compiled for the chip: tier 2 skipped: libtpu not installed (tiers 0,1 passed)"
    assert compiled_verdict(report(bwd_unreached), (0, 1, 2), "v5e").ok is False
    assert compiled_verdict(report(), (0, 1, 2), "v5e").ok is False


def test_a_check_that_could_not_finish_is_not_verified_rather_than_incorrect(tmp_path):
    import asyncio

    from pallasite.engine.workers.backend import Reply
    from pallasite.engine.checker import CheckOptions
    from pallasite.engine.eval_tasks import discover
    from pallasite.engine.judge import Judge, Trusted

    class Killed:
        def backend(self, options, untrusted=False):
            return self

        async def request(self, params, **kw):
            return Reply("crashed", message="the worker went over its memory limit of 8192 MiB and was stopped")

    (task,) = [t for t in discover(str(DATA / "eval")) if t.name == "add_tuned"]
    judge = Judge(Killed(), CheckOptions(target="v5e"), Trusted.of_task(task))
    test = asyncio.run(judge.test(open(task.candidate_path).read()))
    assert test.correct is None and test.outcome == "not verified" and "memory limit" in test.why


def test_an_edited_candidate_is_judged_again_not_resumed(tmp_path):
    """The eval id held the reference's text only: after editing a task's optimized.py, a re-run resumed the
    stored verdict of the old file (found re-judging JAXBench 7p)."""
    import shutil

    from pallasite.agents.eval_agents import eval_id
    from pallasite.engine.eval_tasks import discover

    shutil.copytree(DATA / "eval", tmp_path / "eval")
    before = eval_id(discover(str(tmp_path / "eval")), {"files": "files"}, "scripted", "v5e", "estimate", True)
    assert eval_id(discover(str(tmp_path / "eval")), {"files": "files"}, "scripted", "v5e", "estimate", True) == before
    candidate = tmp_path / "eval" / "add_tuned" / "optimized.py"
    candidate.write_text(candidate.read_text() + "\n# edited\n")
    assert eval_id(discover(str(tmp_path / "eval")), {"files": "files"}, "scripted", "v5e", "estimate", True) != before

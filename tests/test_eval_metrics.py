"""The seed's metrics, checked against hand computations on a small fixture set."""

import math

import pytest

from pallasite.agents.eval_metrics import MissingTiming, TaskOutcome, fast_p, summarize

from eval_cases import case


def ok(*speeds):
    return tuple(case(True, True, s) for s in speeds)


FIXTURE = [
    TaskOutcome("fast", ok(2.0, 8.0)),  # geomean over cases 4.0
    TaskOutcome("slower", ok(0.5)),  # a regression: floored to 1.0 in the geomean
    TaskOutcome("barely", ok(1.04)),  # correct, not "improved"
    TaskOutcome("wrong", (case(True, True, 3.0), case(True, False, None))),  # one case wrong
    TaskOutcome("broken", (case(False, False, None, "E1001 VMEM OOM"),)),  # did not compile
]


def test_metrics_match_hand_computation():
    s = summarize("hand-tuned", FIXTURE, provenance="estimate (v5e)")
    assert s.tasks == 5
    assert s.compile_rate == pytest.approx(4 / 5)
    assert s.correct_rate == pytest.approx(3 / 5)
    # floored: 4.0, 1.0 (0.5 floored), 1.04, 1.0 (wrong), 1.0 (broken)
    assert s.geomean_speedup == pytest.approx((4.0 * 1.04) ** (1 / 5))
    assert s.improved_share == pytest.approx(1 / 5)
    curve = dict(s.fast_p)
    assert curve[0.0] == pytest.approx(3 / 5)  # correct and > 0x
    assert curve[1.0] == pytest.approx(2 / 5)  # 4.0 and 1.04
    assert curve[1.1] == pytest.approx(1 / 5)
    assert curve[3.0] == pytest.approx(1 / 5)
    assert len(s.fast_p) == 31 and s.fast_p[-1][0] == 3.0
    rows = {t["task"]: t for t in s.per_task}
    assert rows["slower"]["speedup"] == pytest.approx(0.5) and rows["slower"]["scored"] == 1.0
    assert rows["wrong"]["speedup"] is None and rows["broken"]["errors"] == ["E1001 VMEM OOM"]
    assert s.to_json()["provenance"] == "estimate (v5e)"


def test_a_task_counts_only_if_every_case_passed():
    t = TaskOutcome("t", (case(True, True, 2.0), case(False, False, None)))
    assert not t.compiled and not t.correct and t.scored() == 1.0


@pytest.mark.parametrize("missing", [None, 0.0, math.nan])
def test_missing_timing_is_an_error_not_one_x(missing):
    tasks = [TaskOutcome("a", ok(2.0)), TaskOutcome("no_time", ok(1.5, missing))]
    with pytest.raises(MissingTiming, match="no_time.*case 1"):
        summarize("m", tasks, provenance="device (TPU v5 lite)")
    with pytest.raises(MissingTiming):
        fast_p(tasks)


def test_failed_tasks_count_one_x_and_empty_sets_are_refused():
    s = summarize("m", [TaskOutcome("x", (case(False, False),)), TaskOutcome("y", ok(4.0))],
                  provenance="estimate (v6e)")
    assert s.geomean_speedup == pytest.approx(2.0)
    with pytest.raises(ValueError, match="no tasks"):
        summarize("m", [], provenance="estimate (v6e)")


def test_a_task_without_a_candidate_is_failed_not_compiled_or_correct():
    s = summarize("files", [TaskOutcome("ref_only", (case(False, False, None, "no candidate", candidate=False),)),
                            TaskOutcome("y", ok(4.0))], provenance="device (TPU v5 lite)")
    assert s.compile_rate == 0.5 and s.correct_rate == 0.5 and s.with_candidate == 1
    rows = {t["task"]: t for t in s.per_task}
    assert rows["ref_only"]["status"] == "no candidate" and rows["ref_only"]["scored"] == 1.0
    # a case without a candidate never passes, whatever it was flagged with
    t = TaskOutcome("t", (case(True, True, 1.0, candidate=False),))
    assert not t.compiled and not t.correct


def test_a_refused_speedup_leaves_no_speedup_figures():
    why = "no estimated speedup: the reference and the kernel were estimated by different models"
    s = summarize("files", [TaskOutcome("a", (case(True, True, None, refused=why),)), TaskOutcome("b", ok(2.0))],
                  provenance="estimate (v5e)")
    assert s.correct_rate == 1.0 and s.geomean_speedup is None and s.improved_share is None and s.fast_p == ()
    assert s.speedup_refused == why and s.per_task[0]["speedup_refused"] == why


def test_a_correct_task_without_an_estimate_is_left_out_and_the_others_keep_their_figures():
    """One correct task the cost model could not estimate erased the geomean, fast_p and "improved" of
    every task of the method, as if two methods had been mixed. Now it is left out, with its reason."""
    why = "no speedup: the candidate has no timing"
    s = summarize("files", [TaskOutcome("a", (case(True, True, None, untimed=why),)),
                            TaskOutcome("b", ok(2.0)), TaskOutcome("c", ok(0.5))], provenance="estimate (v5e)")
    assert s.speedup_refused is None and s.excluded == (("a", why),)
    assert math.isclose(s.geomean_speedup, math.sqrt(2.0 * 1.0))  # over b and c only (c floored at 1.0x)
    assert s.improved_share == 0.5 and dict(s.fast_p)[1.0] == 0.5
    assert s.correct_rate == 1.0 and s.per_task[0]["excluded"] == why and s.per_task[0]["scored"] is None
    alone = summarize("files", [TaskOutcome("a", (case(True, True, None, untimed=why),))], provenance="x")
    assert alone.geomean_speedup is None and alone.excluded == (("a", why),)


def test_not_verified_is_not_incorrect_in_the_task_status():
    """The eval report showed a task whose correctness could not be verified as "compiled, not correct"."""
    s = summarize("files", [TaskOutcome("big", (case(True, False, None, "too big", verified=False),)),
                            TaskOutcome("wrong", (case(True, False, None, "wrong_result"),))], provenance="x")
    assert [t["status"] for t in s.per_task] == ["compiled, not verified", "compiled, wrong"]


def test_a_task_without_a_figure_says_why_whatever_its_verdict():
    """A task not verified (or wrong) whose estimate failed used to show no timing and no reason: the row now
    says "not estimated: <why>"; a passed one is left out of the speedup figures with that reason."""
    from pallasite.agents.eval_job import TaskVerdict, no_figure
    from pallasite.analysis.verdict import Timing, Verdict

    why = no_figure(None, None, "not estimated: the kernel has no estimate: a dynamic grid")
    assert why == "not estimated: the kernel has no estimate: a dynamic grid"
    assert no_figure(None, None, "") == "not estimated (the candidate): no figure and no reason was reported"
    ref = Timing(1e-3, "estimate", "v6e", "m")
    assert no_figure(ref, ref, "x") is None
    assert no_figure(ref, None, "the reference failed").startswith("not estimated (the reference)")
    unverified = TaskVerdict("moe", Verdict.of(True, None), no_figure=why)
    passed = TaskVerdict("moe2", Verdict.of(True, True, judged_by="the judge"), no_figure=why)
    assert TaskVerdict.from_json(unverified.to_json()).no_figure == why
    s = summarize("m", [TaskOutcome("moe", (unverified.case(),)), TaskOutcome("moe2", (passed.case(),)),
                        TaskOutcome("y", ok(2.0))], provenance="estimate (v6e)")
    rows = {t["task"]: t for t in s.per_task}
    assert rows["moe"]["no_figure"] == why and rows["moe"]["timing"] is None
    assert rows["moe2"]["excluded"] == why and rows["y"]["no_figure"] is None
    assert s.geomean_speedup == pytest.approx(2.0 ** 0.5)  # moe2 (untimed) is left out; moe (not verified) counts 1.0x


def test_a_task_passed_by_anyone_but_the_judge_is_counted_apart_never_correct():
    """Issue 49: eval's metrics count only the judge's verdicts: a case that passed by the candidate's own word
    (or an unknown one) is neither correct nor scored, and the summary lists it apart."""
    judged = TaskOutcome("judged", (case(True, True, 2.0),))
    own = TaskOutcome("own", (case(True, True, 9.0, judged_by="the candidate"),))
    s = summarize("files", [judged, own], provenance="estimate (v6e)")
    assert s.correct_rate == 0.5 and s.not_judged == ("own",)
    assert [t["correct"] for t in s.per_task] == [True, None]
    assert s.geomean_speedup == pytest.approx((2.0 * 1.0) ** 0.5)

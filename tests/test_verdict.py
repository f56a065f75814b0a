"""The one verdict and the one way to divide two timings (analysis/verdict.py)."""

import pytest

from pallasite.analysis.verdict import (COST_MODEL, SpeedupRefused, Timing, Verdict, pick_winner, speedup,
                                        try_speedup)

DEV = Timing(2e-3, "device", "TPU v6 lite")
EST = Timing(1e-3, "estimate", "v6e", COST_MODEL)


def test_a_speedup_between_an_estimate_and_a_device_timing_cannot_be_built():
    with pytest.raises(SpeedupRefused, match="different methods"):
        speedup(DEV, EST, baseline_name="the reference")
    s, why = try_speedup(EST, DEV, baseline_name="the reference")
    assert s is None and "estimate is never divided by a device timing" in why


def test_estimates_of_two_different_models_are_refused():
    xla = Timing(3e-3, "estimate", "v6e", "XLA optimal_seconds (cpu)")
    s, why = try_speedup(xla, EST, baseline_name="the reference")
    assert s is None
    assert why.startswith("no estimated speedup: the reference and the kernel were estimated by different models")


def test_cpu_time_never_becomes_a_speedup_and_chips_must_match():
    interp = Timing(5e-2, "interpret", "cpu")
    host = Timing(1e-4, "host", "cpu")
    assert try_speedup(host, interp, baseline_name="x")[0] is None
    assert "not TPU time" in try_speedup(DEV, interp, baseline_name="x")[1]
    assert "different chips" in try_speedup(DEV, Timing(1e-3, "device", "TPU v5 lite"), baseline_name="x")[1]
    assert "different chips" in try_speedup(EST, Timing(1e-3, "estimate", "v5e", COST_MODEL), baseline_name="x")[1]


def test_same_method_divides_and_names_its_baseline():
    s = speedup(Timing(4e-3, "device", "TPU v6 lite"), DEV, baseline_name="the XLA reference")
    assert s.value == pytest.approx(2.0)
    assert s.text() == "2.00x vs the XLA reference (device (TPU v6 lite))"
    s = speedup(Timing(3e-3, "estimate", "v6e", COST_MODEL), EST, baseline_name="the original file")
    assert s.value == pytest.approx(3.0) and f"estimate ({COST_MODEL}, v6e)" in s.text()


def test_an_estimate_must_name_its_model_and_labels_never_say_device_for_host_time():
    with pytest.raises(ValueError, match="model"):
        Timing(1.0, "estimate", "v6e")
    assert "not TPU time" in Timing(1.0, "host", "TPU v6 lite").label()
    assert "device" not in Timing(1.0, "host", "TPU v6 lite").label()
    t = Timing(1e-3, "device", "TPU v5 lite", method="xprof", versions=(("jax", "0.10.2"),))
    assert Timing.from_json(t.to_json()) == t


def test_no_candidate_is_failed_not_compiled_or_correct():
    v = Verdict.no_candidate("the task has no candidate kernel")
    assert not v.passed and v.compiled is False and v.correct is False and v.status() == "no candidate"
    assert not Verdict.of(True, None).passed and Verdict.of(True, None).status() == "compiled, not verified"


def test_a_slower_candidate_is_never_the_winner():
    base = Timing(1e-3, "estimate", "v6e", COST_MODEL)
    slow = Verdict.of(True, True, Timing(1e-3 / 0.6, "estimate", "v6e", COST_MODEL), judged_by="the judge")
    w = pick_winner(base, [(1, slow)], baseline_name="the original file")
    assert w.name is None and w.why.startswith("no winner: the best correct candidate is 0.60x")
    fast = Verdict.of(True, True, Timing(5e-4, "estimate", "v6e", COST_MODEL), judged_by="the judge")
    wrong_but_fastest = Verdict.of(True, False, Timing(1e-5, "estimate", "v6e", COST_MODEL))
    w = pick_winner(base, [(1, slow), (2, fast), (3, wrong_but_fastest)], baseline_name="the original file")
    assert w.name == 2 and w.speedup.value == pytest.approx(2.0)
    w = pick_winner(base, [(1, Verdict.of(True, True, Timing(5e-4, "device", "TPU v6 lite"), judged_by="the judge"))])
    assert w.name is None and "was timed like the original" in w.why
    assert pick_winner(None, [(2, fast)]).why.startswith("no winner: the original was not timed")


def test_a_candidate_verified_only_at_a_reduced_size_ranks_below_one_verified_at_the_tasks_size():
    """Size honesty (issue 56): a faster candidate checked only at "seq_len 512 of 4096" does not outrank a
    correct one checked at the task's own size; between two at reduced sizes the faster still wins."""
    from pallasite.analysis.verdict import CompileResult, JudgedBy, TestResult, rank

    base = Timing(1e-3, "estimate", "v6e", COST_MODEL)

    def judged(seconds: float, at: str | None) -> Verdict:
        return Verdict(CompileResult.passed("v6e"), TestResult.ok("here", verified_at=at),
                       Timing(seconds, "estimate", "v6e", COST_MODEL), judged_by=JudgedBy.JUDGE)

    fast_reduced, slow_full = judged(2e-4, "seq_len 512 of 4096"), judged(5e-4, None)
    ranking = rank(base, [("reduced", fast_reduced), ("full", slow_full)])
    assert ranking.order == ("full", "reduced") and ranking.winner.name == "full"
    both = rank(base, [("a", judged(5e-4, "seq_len 512 of 4096")), ("b", fast_reduced)])
    assert both.order == ("b", "a")
    assert "(verified at seq_len 512 of 4096)" in fast_reduced.text()


def test_the_verdicts_cost_model_name_is_the_one_the_cost_model_reports():
    from pallasite.runner.program import cost_model

    assert COST_MODEL == cost_model.MODEL


def _report(findings=(), kernels=(), notes=()):
    from pallasite.analysis.types import FileReport

    return FileReport("k.py", tuple(findings), tuple(kernels), tuple(notes))


def test_a_skipped_tier_2_is_not_compiled_for_the_chip_and_never_passes():
    from pallasite.analysis.types import KernelVerdict, Span
    from pallasite.analysis.verdict import TestResult, compile_result

    skipped = _report(kernels=[KernelVerdict("k", Span.point(1), ((0, "ok"), (1, "ok"), (2, "skipped: libtpu not installed")))])
    c = compile_result(skipped, (0, 1, 2), "v5e")
    assert c.ok is None and c.tiers_run == (0, 1) and c.tiers_skipped == ((2, "libtpu not installed"),)
    v = Verdict(c, TestResult.ok())
    assert not v.passed and v.status() == "not compiled for the chip"
    assert v.text() == "not compiled for the chip: tier 2 skipped: libtpu not installed (tiers 0,1 passed)"
    only_01 = compile_result(_report(kernels=[KernelVerdict("k", Span.point(1), ((0, "ok"), (1, "ok")))]), (0, 1), "v5e")
    assert only_01.ok is None and "tier 2 was not run" in only_01.text()
    ran = _report(kernels=[KernelVerdict("k", Span.point(1), ((0, "ok"), (1, "ok"), (2, "ok")))])
    assert compile_result(ran, (0, 1, 2), "v5e").ok is True
    assert Verdict(compile_result(ran, (0, 1, 2), "v5e"), TestResult.ok()).status() == "compiled, correct"


def test_could_not_run_is_not_verified_never_wrong_and_the_size_verified_at_is_said():
    from pallasite.analysis.verdict import CompileResult, TestResult

    crashed = Verdict(CompileResult.passed("v5e"), TestResult.not_verified("the worker crashed (exit -9)"))
    assert crashed.correct is None and crashed.status() == "compiled, not verified"
    assert crashed.text() == "compiled, not verified: the worker crashed (exit -9)"
    wrong = Verdict(CompileResult.passed("v5e"), TestResult.wrong("max abs error 3.2 at [0, 5]"))
    assert wrong.correct is False and wrong.status() == "compiled, wrong"
    small = Verdict(CompileResult.passed("v5e"), TestResult.ok("interpret", verified_at="seq 2048 of 16384"))
    assert small.passed and small.text() == "compiled, correct (verified at seq 2048 of 16384)"
    for v in (crashed, wrong, small, Verdict.no_candidate("none")):
        assert Verdict.from_json(v.to_json()) == v


def test_a_correct_candidate_that_was_not_timed_is_said_untimed_not_failed():
    from pallasite.analysis.verdict import CompileResult, TestResult

    base = Timing(1e-3, "estimate", "v6e", COST_MODEL)
    untimed = Verdict(CompileResult.passed("v6e"), TestResult.ok(), judged_by="the judge")
    w = pick_winner(base, [(1, untimed)], baseline_name="the original file")
    assert w.name is None and "compiled and passed the tests but none was timed" in w.why
    assert "no candidate compiled and passed" not in w.why

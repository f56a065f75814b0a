"""The optimize loop with the scripted provider and an injected evaluator (no workers)."""

from __future__ import annotations

import pytest

from pallasite.agents.evaluator import BaseEvaluator
from pallasite.analysis.verdict import COST_MODEL, CompileResult, TestResult, Timing
from pallasite.agents.optimize import Budgets, Decision, PhaseResult, new_run, optimize
from pallasite.agents.optimize_record import OptimizeRecorder, export, load, replay_table
from pallasite.agents.llm.providers import ProviderConfig
from pallasite.agents.llm.providers_scripted import ScriptedProvider


class MarkerEvaluator(BaseEvaluator):
    """Judges a source by markers in it: BROKEN fails to compile, WRONG fails the tests, COST=<s> is
    the estimate (a stand-in for the worker; the real one is tested in test_optimize_e2e.py)."""

    method = "estimate (v6e)"

    def __init__(self) -> None:
        self.measured: list[str] = []

    async def compile(self, source):  # a typed result, as the Judge gives (a bare ok is "not checked")
        evidence = "ValueError: block shape (7, 128) not divisible by (8, 128)"
        if "BROKEN" in source:
            return PhaseResult(False, "error", evidence=evidence,
                               compile=CompileResult.failed("not divisible", evidence, chip="v6e", tiers=(0, 1, 2)))
        return PhaseResult(True, "compiles", compile=CompileResult.passed("v6e"))

    async def test(self, source):
        evidence = "max abs error 1.0 > atol 1e-2"
        if "WRONG" in source:
            return PhaseResult(False, "rejected by the frozen tests", evidence=evidence, test=TestResult.wrong(evidence))
        return PhaseResult(True, "matches", test=TestResult.ok("the marker stand-in"), judged_by="the judge")

    async def measure(self, source):
        self.measured.append(source)
        cost = float(source.split("COST=")[1].split()[0]) if "COST=" in source else 1.0
        return PhaseResult(True, "estimated", timing=Timing(cost, "estimate", "v6e", COST_MODEL, self.method))


ORIGINAL = "import jax\n# COST=1.0\n"


def script(*sources):
    out = []
    for i, src in enumerate(sources):
        out += [f"Plan {i + 1}: try something\nDetails.", f"```python\n{src}```"]
    return out


@pytest.fixture
def provider():
    return ScriptedProvider(ProviderConfig(name="scripted"), script(
        "import jax\n# BROKEN COST=0.1\n", "import jax\n# WRONG COST=0.2\n", "import jax\n# COST=0.5\n"))


async def test_three_iterations_right_one_wins(provider, tmp_path):
    ev = MarkerEvaluator()
    rec = OptimizeRecorder(tmp_path)
    state = await optimize(new_run("k.py", ORIGINAL), provider, ev, Budgets(iterations=3, fix_rounds=0), recorder=rec)
    assert [it.verdict for it in state.iterations] == ["not compiled", "compiled, wrong", "valid"]
    assert state.best.index == 3 and state.speedup() == pytest.approx(2.0)
    # the failing candidates were never measured: cheaper estimates cannot make them win
    assert all("BROKEN" not in s and "WRONG" not in s for s in ev.measured)
    # evidence of a failure goes back to the planner
    second_plan = provider.requests[2].prompt
    assert "not compiled" in second_plan and "not divisible" in second_plan
    assert "max abs error" in provider.requests[4].prompt
    # the table says why each failed, in one line (it was empty for all but model errors)
    assert [row["why"] for row in state.table()] == [
        "ValueError: block shape (7, 128) not divisible by (8, 128)", "max abs error 1.0 > atol 1e-2", ""]
    # replay from the store's export gives the same table
    exported = export(rec.store, state.run_id)
    assert replay_table(exported) == state.table()
    rec.close()


async def test_budget_of_tokens_stops_the_run(provider):
    state = await optimize(new_run("k.py", ORIGINAL), provider, MarkerEvaluator(),
                           Budgets(iterations=3, max_tokens=1, fix_rounds=0))
    assert "token budget" in state.stopped and len(state.iterations) <= 2


async def test_resume_after_a_crash_mid_iteration(tmp_path):
    class Crash(Exception):
        pass

    class Crashing(MarkerEvaluator):
        async def test(self, source):
            if "COST=0.5" in source:
                raise Crash()
            return await super().test(source)

    responses = script("import jax\n# BROKEN\n", "import jax\n# COST=0.5\n")
    rec = OptimizeRecorder(tmp_path)
    state = new_run("k.py", ORIGINAL)
    with pytest.raises(Crash):
        await optimize(state, ScriptedProvider(ProviderConfig(name="scripted"), responses), Crashing(),
                       Budgets(iterations=2, fix_rounds=0), recorder=rec)
    resumed = load(rec.store, state.run_id)
    assert [it.verdict for it in resumed.iterations] == ["not compiled"]
    # the second iteration re-runs (its plan and candidate asked again), the first is not repeated
    again = ScriptedProvider(ProviderConfig(name="scripted"), responses[2:])
    done = await optimize(resumed, again, MarkerEvaluator(), Budgets(iterations=2, fix_rounds=0), recorder=rec)
    assert [it.verdict for it in done.iterations] == ["not compiled", "valid"] and len(again.requests) == 2
    rec.close()


async def test_step_mode_approve_revise_approve(provider):
    seen = []

    async def gate(phase, payload):
        seen.append(phase)
        if phase == "plan" and payload["iteration"] == 2:
            return Decision("revise", "Use a bigger block\nmy own plan")
        return Decision("approve")

    state = await optimize(new_run("k.py", ORIGINAL), provider, MarkerEvaluator(),
                           Budgets(iterations=3, fix_rounds=0), gate=gate)
    assert state.iterations[1].summary == "Use a bigger block"
    assert "my own plan" in provider.requests[3].prompt  # the implementer got the user's plan
    assert seen[:2] == ["plan", "implement"]


async def test_stop_in_step_mode():
    async def gate(phase, payload):
        return Decision("stop")

    prov = ScriptedProvider(ProviderConfig(name="scripted"), script("import jax\n"))
    state = await optimize(new_run("k.py", ORIGINAL), prov, MarkerEvaluator(), Budgets(iterations=3), gate=gate)
    assert "stopped by the user" in state.stopped and state.best is None


async def test_a_slower_candidate_is_never_the_winner(tmp_path):
    """Issue 23: a correct 0.60x candidate is not starred, not written, and the table says why."""
    from pallasite.server.commands.cmd_optimize import table_text

    provider = ScriptedProvider(ProviderConfig(name="scripted"), script("import jax\n# COST=1.6667\n"))
    state = await optimize(new_run("k.py", ORIGINAL), provider, MarkerEvaluator(), Budgets(iterations=1, fix_rounds=0))
    (it,) = state.iterations
    assert it.verdict == "valid" and state.winner is None
    assert [r["best"] for r in state.table()] == [False]
    assert state.table()[0]["speedup"] == pytest.approx(0.6, rel=1e-3)
    why = state.outcome().why
    assert why.startswith("no winner: the best correct candidate is 0.60x vs the original file") and "not faster" in why
    text = table_text(state)
    assert why in text and "*" not in text.splitlines()[1][:4]


async def test_a_candidate_timed_by_another_method_cannot_win():
    class Mixed(MarkerEvaluator):
        async def measure(self, source):
            r = await super().measure(source)
            timing = r.timing if source == ORIGINAL else Timing(r.seconds, "device", "TPU v6 lite")
            return PhaseResult(True, "timed", timing=timing)

    provider = ScriptedProvider(ProviderConfig(name="scripted"), script("import jax\n# COST=0.1\n"))
    state = await optimize(new_run("k.py", ORIGINAL), provider, Mixed(), Budgets(iterations=1, fix_rounds=0))
    assert state.winner is None and state.speedup() is None
    assert "different methods" in state.outcome().why


class FixingEvaluator(MarkerEvaluator):
    """A compile failure is fixed by asking ``fixer`` (a model): its reply is the replacement marker."""

    def __init__(self, fixer) -> None:
        super().__init__()
        self.fixer = fixer

    async def fix(self, source, failed):
        from pallasite.agents.llm.providers import ModelRequest

        reply = await self.fixer.complete(ModelRequest(system="fix", prompt=source))
        return PhaseResult(True, "verified fix", source=source.replace("BROKEN", reply.text.strip()),
                           data={"usage": reply.usage})


async def test_replay_of_a_run_with_fix_rounds_reproduces_the_table(tmp_path):
    """Issue 23: the fixer's calls inside optimize go through the run's model client, so a replay of
    the recorded calls gives the same table (before, they were not recorded and the replay diverged)."""
    from pallasite.agents.llm.model_client import ModelClient
    from pallasite.agents.llm.providers_scripted import ReplayProvider
    from pallasite.knowledge.store import store_path

    responses = ["Plan 1: blocks\nDetails.", "```python\nimport jax\n# BROKEN\n```", "COST=0.25",
                 "Plan 2: more\nDetails.", "```python\nimport jax\n# COST=0.5\n```"]
    rec = OptimizeRecorder(tmp_path)
    model = ScriptedProvider(ProviderConfig(name="scripted"), responses)
    state = new_run("k.py", ORIGINAL)
    ev = FixingEvaluator(ModelClient(model, run_id=state.run_id, recorder=rec))
    state = await optimize(state, model, ev, Budgets(iterations=2, fix_rounds=1), recorder=rec)
    assert [it.verdict for it in state.iterations] == ["valid", "valid"] and state.winner.index == 1
    rec.close()

    replay = ReplayProvider(ProviderConfig(name=f"replay:{state.run_id}", store_path=str(store_path(tmp_path))))
    again = new_run("k.py", ORIGINAL)
    replayed = await optimize(again, replay, FixingEvaluator(ModelClient(replay, run_id=again.run_id)),
                              Budgets(iterations=2, fix_rounds=1))
    def rows(st):  # wall-clock seconds differ between runs; everything else must not
        return [{k: v for k, v in r.items() if k != "seconds"} for r in st.table()]

    assert rows(replayed) == rows(state)
    assert [r.prompt for r in replay.requests] == [r.prompt for r in model.requests]


def test_the_best_iteration_so_far_comes_from_the_one_ranking_and_never_from_a_self_judged_figure():
    """RunState.best (what the next iteration starts from) ranked by ``rank``: a faster candidate whose figure
    its own process made never beats a judged one (before: the fastest valid iteration, whoever judged it)."""
    from pallasite.agents.optimize import Iteration, new_run
    from pallasite.analysis.verdict import COST_MODEL, Timing, Verdict

    def iteration(index: int, seconds: float, judged_by: str) -> Iteration:
        timing = Timing(seconds, "estimate", "v6e", COST_MODEL)
        return Iteration(index, source=f"# {index}\n", verdict="valid",
                         result=Verdict.of(True, True, timing, judged_by=judged_by))

    state = new_run("/tmp/k.py", "# original\n")
    state.iterations = [iteration(1, 1e-6, "the candidate"), iteration(2, 3e-6, "the judge"),
                        iteration(3, 2e-6, "the judge")]
    assert state.best.index == 3  # the fastest judged one; no baseline needed to order one method's figures
    state.iterations = [iteration(1, 1e-6, "the candidate")]
    assert state.best is None

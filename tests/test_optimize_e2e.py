"""The optimize loop end to end on CPU: the scripted provider, real workers, the frozen tests, the estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.agents.optimize import Budgets, new_run, optimize
from judging import file_evaluator
from pallasite.engine.judge_phase import freeze, frozen_parts
from pallasite.agents.optimize_record import OptimizeRecorder, export, replay_table
from pallasite.agents.llm.providers import ProviderConfig
from pallasite.agents.llm.providers_scripted import ScriptedProvider
from pallasite.analysis.verdict import COST_MODEL
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import Engine

pytestmark = pytest.mark.pipeline  # a whole command end to end: .ci/run's pipeline step

DATA = Path(__file__).parent / "data" / "optimize"


def candidate(name: str) -> str:
    return (DATA / "candidates" / f"{name}.py").read_text()


def replies(*names: str) -> list[str]:
    out = []
    for name in names:
        out += [f"Try {name}\nbecause the grid has many small steps.", f"```python\n{candidate(name)}```"]
    return out


@pytest.fixture
async def engine():
    e = Engine(use_store=False)
    yield e
    await e.close()


def evaluator(engine, original):
    return file_evaluator(engine, str(DATA / "add.py"), original, CheckOptions(target="v6e", tiers=(0, 1)))


async def test_auto_run_the_right_candidate_wins(engine, tmp_path):
    original = (DATA / "add.py").read_text()
    provider = ScriptedProvider(ProviderConfig(name="scripted"), replies("bad_tiling", "wrong_math", "big_blocks"))
    rec = OptimizeRecorder(tmp_path)
    state = await optimize(new_run(str(DATA / "add.py"), original), provider, evaluator(engine, original),
                           Budgets(iterations=3, fix_rounds=0), recorder=rec)
    table = state.table()
    assert [r["loop_word"] for r in table] == ["not compiled", "compiled, wrong", "valid"], table
    assert [r["compiled"] for r in table] == [False, True, True]
    # the label is the Timing's: the model that estimated it and the chip
    assert state.best.index == 3 and state.best.label == f"estimate ({COST_MODEL}, v6e)"
    assert state.baseline_label == f"estimate ({COST_MODEL}, v6e)" and state.speedup() > 1.0
    assert "(7, 128)" in state.iterations[0].evidence or "divisible" in state.iterations[0].evidence
    assert replay_table(export(rec.store, state.run_id)) == table
    rec.close()


@pytest.mark.parametrize("name, trick", [("no_pallas", "pallas"), ("writes_input", "input")])
async def test_frozen_tests_reject_cheats(engine, name, trick):
    original = (DATA / "add.py").read_text()
    result = await evaluator(engine, original).test(candidate(name))
    assert not result.ok and trick in result.evidence.lower(), result


def test_candidate_cannot_change_its_tests():
    original = (DATA / "add.py").read_text()
    cheat = candidate("big_blocks").replace("return x + y", "return x * 0")
    frozen = freeze(cheat, frozen_parts(original))
    namespace: dict = {}
    exec(compile(frozen, "f.py", "exec"), namespace)  # noqa: S102 - a fixture of ours, definitions only
    assert namespace["reference"](2, 3) == 5


async def test_all_six_phases_autotune_and_profile_reach_the_planner(engine):
    original = (DATA / "add.py").read_text()
    provider = ScriptedProvider(ProviderConfig(name="scripted"), replies("tunable_rows", "big_blocks"))
    state = await optimize(new_run(str(DATA / "add.py"), original), provider, evaluator(engine, original),
                           Budgets(iterations=2, fix_rounds=0))
    first = state.iterations[0]
    assert [p["phase"] for p in first.phases] == ["plan", "implement", "compile", "test", "autotune", "profile"]
    tune = next(p for p in first.phases if p["phase"] == "autotune")
    # the cost model ranks bigger row blocks first; the tuned source (re-tested) is the candidate
    assert tune["ok"] and "block_rows" in tune["summary"], tune
    assert "block_rows: int = 8" not in first.source and "block_rows: int =" in first.source
    assert "interpret mode on CPU at float32[256, 128]" in next(p for p in first.phases if p["phase"] == "test")["summary"]
    # the profile: the cost model's breakdown, labelled, for the baseline and each candidate, sent to the planner
    assert first.profile.startswith("profile (cost model, not a device profile): estimate (v6e)")
    assert "-bound (compute" in first.profile and "grid (" in first.profile
    first_plan, second_plan = provider.requests[0].prompt, provider.requests[2].prompt
    assert "Where the original's time goes" in first_plan and "grid (32,)" in first_plan
    assert first.profile.splitlines()[0] in second_plan
    # a candidate without tunables: the phase says so and changes nothing
    second = state.iterations[1]
    assert "nothing to tune" in next(p for p in second.phases if p["phase"] == "autotune")["summary"]


async def test_a_compile_failure_is_fixed_by_the_verified_fixer(engine):
    import json

    original = (DATA / "add.py").read_text()
    edit = {"explanation": "rows in multiples of 8", "edits": [
        {"search": "pl.BlockSpec((7, x.shape[1])", "replace": "pl.BlockSpec((16, x.shape[1])"},
        {"search": "grid=(x.shape[0] // 7,)", "replace": "grid=(x.shape[0] // 16,)"}]}
    loop_provider = ScriptedProvider(ProviderConfig(name="scripted"), replies("bad_tiling"))
    fix_provider = ScriptedProvider(ProviderConfig(name="scripted"), [
        {"text": json.dumps(edit), "input_tokens": 1000, "output_tokens": 234}])
    ev = file_evaluator(engine, str(DATA / "add.py"), original, CheckOptions(target="v6e", tiers=(0, 1)),
                         fixer=fix_provider)
    state = await optimize(new_run(str(DATA / "add.py"), original), loop_provider, ev, Budgets(iterations=1, fix_rounds=2))
    it = state.iterations[0]
    assert [(p["phase"], p["ok"]) for p in it.phases][2:4] == [("compile", False), ("compile", True)], it.phases
    assert it.verdict == "valid" and "// 16" in it.source and "# --- frozen tests" not in it.source
    assert len(fix_provider.requests) == 1 and "7" in fix_provider.requests[0].prompt
    # the fixer's tokens count in the iteration's and the run's usage
    assert it.tokens >= 1234 and state.usage.total_tokens == it.tokens


async def test_a_candidate_that_moves_its_blocks_by_hand_is_priced_by_the_bytes_its_dmas_move(engine):
    """Issue 56: manual DMAs (pl.ANY operands) are counted, by the bytes they move, and are not hidden behind
    the kernel's compute. Before, they cost nothing (JAXBench's 14.25x artifact), so such a kernel went unranked;
    now it ranks with a figure no lower than the same kernel with BlockSpecs, which moves the same bytes."""
    original = (DATA / "add.py").read_text()
    ev = evaluator(engine, original)
    base = await ev.measure(original)
    assert base.ok and base.data["lower_bound"] is False
    dma = candidate("manual_dma")
    assert (await ev.compile(dma)).ok and (await ev.test(dma)).ok
    by_hand = await ev.measure(dma)
    assert by_hand.ok and by_hand.data["lower_bound"] is False, by_hand.summary
    blocks = await ev.measure(candidate("manual_dma").replace("pl.BlockSpec(memory_space=pl.ANY)",
                                                             "pl.BlockSpec((ROWS, x.shape[1]), lambda i: (i, 0))"))
    assert blocks.ok and by_hand.timing.seconds >= blocks.timing.seconds * (1 - 1e-9)


async def test_candidate_checks_leave_no_verdict_under_the_users_file(tmp_path):
    """A candidate is checked under the user's path (its imports resolve there), but its verdict is not
    the file's: the hover and `pallasite results` read the newest stored verdicts of a path. Before, a
    candidate that failed tier 1 left its error as the file's newest tier-1 verdict in the store."""
    folder = tmp_path / "ws"
    (folder / ".pallasite").mkdir(parents=True)
    path = folder / "add.py"
    path.write_text((DATA / "add.py").read_text())
    engine = Engine(workspace=folder)
    try:
        options = CheckOptions(target="v6e", tiers=(0, 1))
        mine = await engine.check(str(path), options)
        ev = file_evaluator(engine, str(path), path.read_text(), options)
        assert not (await ev.compile(candidate("bad_tiling"))).ok
        stored = engine.stored_checks(str(path))
        assert stored and all(r.key.code_hash == engine.store_for(str(path)).source_hash(str(path), path.read_text())
                              for r in stored if r.tier != 2), stored
        assert not [r for r in stored if r.findings], (mine.findings, stored)
    finally:
        await engine.close()


async def test_with_a_device_backend_that_answers_cpu_timings_nothing_is_ranked(engine):
    """``--backend local`` on a machine without a TPU: the frozen tests run on that worker, but its
    timings are CPU timings, so the measure phase refuses them (never a ranked CPU time)."""
    from pallasite.engine.workers.remote import BackendSettings

    original = (DATA / "add.py").read_text()
    ev = file_evaluator(engine, str(DATA / "add.py"), original, CheckOptions(target="v6e", tiers=(0, 1)),
                         device=BackendSettings(kind="local"))
    assert ev.method.startswith("device (local")
    assert (await ev.test(candidate("big_blocks"))).ok
    measured = await ev.measure(candidate("big_blocks"))
    assert not measured.ok and measured.seconds is None
    assert "not on a device" in measured.evidence and "CPU time never ranks" in measured.evidence, measured

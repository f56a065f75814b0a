"""The optimize loop end to end on CPU: the scripted provider, real workers, the frozen tests, the estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.agents.optimize import Budgets, new_run, optimize
from pallasite.agents.optimize_eval import EngineEvaluator, freeze, frozen_parts
from pallasite.agents.optimize_record import OptimizeRecorder, export, replay_table
from pallasite.agents.providers import ProviderConfig
from pallasite.agents.providers_scripted import ScriptedProvider
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import Engine

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
    return EngineEvaluator(engine, str(DATA / "add.py"), original, CheckOptions(target="v6e", tiers=(0, 1)))


async def test_auto_run_the_right_candidate_wins(engine, tmp_path):
    original = (DATA / "add.py").read_text()
    provider = ScriptedProvider(ProviderConfig(name="scripted"), replies("bad_tiling", "wrong_math", "big_blocks"))
    rec = OptimizeRecorder(tmp_path)
    state = await optimize(new_run(str(DATA / "add.py"), original), provider, evaluator(engine, original),
                           Budgets(iterations=3, fix_rounds=0), recorder=rec)
    table = state.table()
    assert [r["verdict"] for r in table] == ["compile failed", "incorrect", "valid"], table
    assert [r["compiled"] for r in table] == [False, True, True]
    assert state.best.index == 3 and state.best.label == "estimate (v6e)"
    assert state.baseline_label == "estimate (v6e)" and state.speedup() > 1.0
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

"""The test writer and the frozen tests phase: proposed, validated in a worker, reviewed, frozen."""

from __future__ import annotations

from pathlib import Path

import pytest

from pallasite.agents import test_writer
from pallasite.agents.optimize import Budgets, Decision, new_run, optimize
from judging import file_evaluator
from pallasite.agents.optimize_record import OptimizeRecorder, load
from pallasite.agents.llm.providers import ProviderConfig
from pallasite.agents.llm.providers_scripted import ScriptedProvider
from pallasite.engine.checker import CheckOptions
from pallasite.engine.engine import Engine

DATA = Path(__file__).parent / "data" / "optimize"
KERNEL = DATA / "no_tests.py"


def written(name: str) -> str:
    return (DATA / "tests" / f"{name}.py").read_text()


def block(text: str) -> str:
    return f"Here are the tests.\n```python\n{text}```"


def scripted(*replies: str) -> ScriptedProvider:
    return ScriptedProvider(ProviderConfig(name="scripted"), list(replies))


@pytest.fixture
async def engine():
    e = Engine(use_store=False)
    yield e
    await e.close()


def evaluator(engine, **kw):
    return file_evaluator(engine, str(KERNEL), KERNEL.read_text(), CheckOptions(target="v6e", tiers=(0, 1)), **kw)


def test_what_a_file_lacks():
    assert test_writer.needs(KERNEL.read_text(), str(KERNEL)) == ("example_inputs", "reference")
    assert test_writer.entry_name(KERNEL.read_text(), str(KERNEL)) == "axpy"
    assert test_writer.needs((DATA / "add.py").read_text(), "add.py") == ()


@pytest.mark.parametrize("name, why", [
    ("axpy_no_extra", "no second shape"),
    ("axpy_rewrites_kernel", "defines 'axpy'"),
])
def test_static_refusals(name, why):
    assert why in test_writer.static_problem(written(name), ("example_inputs", "reference"))
    assert "SyntaxError" in test_writer.static_problem("def reference(:\n", ("reference",))


@pytest.mark.pipeline
async def test_a_disagreement_goes_back_to_the_model_with_evidence(engine):
    ev = evaluator(engine)
    model = scripted(block(written("axpy_wrong")), block(written("axpy_rewrites_kernel")),
                     block(written("axpy_right")))
    original = KERNEL.read_text()
    proposal = await test_writer.propose(_ask(model),
                                         str(KERNEL), original, lambda t: test_writer.validate_with(ev, original, t))
    assert proposal.ok and proposal.rounds == 3, proposal
    assert "return 2.0 * x + y" in proposal.text and "second shape" in proposal.summary
    # round 2 was told why round 1 was refused: the ORIGINAL kernel disagreed with the reference
    assert "wrong_result" in model.requests[1].prompt and "return x + y" in model.requests[1].prompt
    assert "defines 'axpy'" in model.requests[2].prompt
    assert "def axpy_kernel" in model.requests[0].prompt  # the kernel file is what the model reads
    assert ev.tests is None  # validation never changed the evaluator's own tests


async def test_no_valid_proposal_within_the_rounds(engine):
    ev = evaluator(engine)
    original = KERNEL.read_text()
    proposal = await test_writer.propose(_ask(scripted(block(written("axpy_wrong")), "no code here")), str(KERNEL),
                                         original, lambda t: test_writer.validate_with(ev, original, t), rounds=2)
    assert not proposal.ok and "no ```python block" in proposal.evidence


def _ask(model):
    async def ask(request):
        return (await model.complete(request)).text
    return ask


def loop_replies(*tests_names: str) -> list[str]:
    big = (DATA / "no_tests.py").read_text().replace("(8, x.shape[1])", "(32, x.shape[1])").replace("// 8", "// 32")
    return [block(written(n)) for n in tests_names] + ["Bigger row blocks\nfewer steps.", f"```python\n{big}```"]


@pytest.mark.pipeline
async def test_step_mode_the_user_revises_the_tests_and_they_are_frozen(engine, tmp_path):
    seen = []
    mine = written("axpy_right").replace("rows: int = 64", "rows: int = 128")

    async def gate(phase, payload):
        seen.append((phase, payload.get("iteration")))
        if phase == "tests":
            assert "return 2.0 * x + y" in payload["tests"]
            return Decision("revise", mine)
        return Decision("approve")

    rec = OptimizeRecorder(tmp_path)
    ev = evaluator(engine)
    state = await optimize(new_run(str(KERNEL), KERNEL.read_text()), scripted(*loop_replies("axpy_right")), ev,
                           Budgets(iterations=1, fix_rounds=0), gate=gate, recorder=rec)
    assert seen[0] == ("tests", 0)
    assert state.context["tests"] == mine and ev.tests == mine and "validated" in state.context["tests_summary"]
    assert state.iterations[0].verdict == "valid", state.iterations[0]
    test_phase = next(p for p in state.iterations[0].phases if p["phase"] == "test")
    assert "float32[128, 128]" in test_phase["summary"]  # the user's shapes are the ones tested
    # the hash is in the recorded snapshot; a resume with other tests is refused with a clear message
    resumed = load(rec.store, state.run_id)
    assert resumed.context["tests_hash"] == ev.tests_hash()
    other = evaluator(engine, tests=written("axpy_right"))
    again = await optimize(resumed, scripted(), other, Budgets(iterations=2, fix_rounds=0))
    assert again.stopped.startswith("refused: the frozen tests differ") and len(again.iterations) == 1
    # resumed without tests of its own, the evaluator takes the recorded ones: same hash, runs on
    same = evaluator(engine)
    resumed = load(rec.store, state.run_id)
    await optimize(resumed, scripted(*loop_replies()), same, Budgets(iterations=1, fix_rounds=0))
    assert same.tests == mine and "refused" not in resumed.stopped
    rec.close()


async def test_a_candidate_cannot_change_written_tests(engine):
    ev = evaluator(engine, tests=written("axpy_right"))
    # a wrong kernel (x + y) bringing a reference that agrees with it: the written reference still rules
    cheat = KERNEL.read_text().replace("2.0 * x_ref[...]", "x_ref[...]") + "\n\ndef reference(x, y):\n    return x + y\n"
    result = await ev.test(cheat)
    assert not result.ok and "wrong_result" in result.evidence
    assert (await evaluator(engine).with_tests(written("axpy_wrong")).test(cheat)).ok  # what the cheat relied on

"""A candidate must not touch the task's tests: engine/guards.py, the fixer and optimize's compile phase."""

from __future__ import annotations

import json
from pathlib import Path

from pallasite.agents.prompts.fix_prompt import FixContext
from pallasite.agents.fixer import Budgets, Fixer
from pallasite.engine.guards import tampering
from pallasite.agents.llm.providers import ProviderConfig
from pallasite.agents.llm.providers_scripted import ScriptedProvider
from pallasite.analysis.tier0 import analyze
from pallasite.analysis.types import FileReport

ORIGINAL = (Path(__file__).parent / "data" / "optimize" / "add.py").read_text()
BROKEN = Path(__file__).parent / "data" / "agents" / "add_reference_bad_tiling.py"


def test_unchanged_tests_and_comment_edits_pass():
    assert tampering(ORIGINAL, ORIGINAL) == []
    assert tampering(ORIGINAL, ORIGINAL.replace("return x + y", "return x + y  # the sum")) == []
    assert tampering(ORIGINAL, ORIGINAL.replace("(8, x.shape[1])", "(128, x.shape[1])")) == []


def test_every_way_of_changing_the_tests_is_named():
    assert tampering(ORIGINAL, ORIGINAL.replace("return x + y", "return x + y + 1")) == \
        ["redefines the task's reference()"]
    assert tampering(ORIGINAL, ORIGINAL + "\nTOLERANCE = {'atol': 10.0}\n") == ["adds the task's TOLERANCE"]
    assert tampering(ORIGINAL, ORIGINAL.replace("rows: int = 256", "rows: int = 8")) == \
        ["redefines the task's example_inputs()"]
    sneaky = ORIGINAL + "\ndef _loosen():\n    global TOLERANCE\n    TOLERANCE = 1.0\n\n" \
                        "globals()['reference'] = lambda x, y: x\nsetattr(__import__('sys'), \"TOLERANCE\", 1)\n"
    found = tampering(ORIGINAL, sneaky)
    assert "rebinds the task's TOLERANCE through `global TOLERANCE`" in found
    assert "writes the task's reference() through globals" in found
    assert "writes the task's TOLERANCE through setattr" in found
    assert tampering(ORIGINAL, "def broken(:\n") == []  # the compile phase reports a syntax error


async def test_the_fixer_refuses_a_fix_that_edits_the_reference():
    text = BROKEN.read_text()
    asked = []

    findings = tuple(f for f in analyze(text, str(BROKEN)).findings if f.severity == "error")
    assert "def reference" in text and findings
    lie = {"explanation": "match the kernel", "edits": [{"search": "def reference(x, y):\n",
                                                         "replace": "def reference(x, y):\n    return x * 0\n"}]}
    provider = ScriptedProvider(ProviderConfig(name="scripted"), [json.dumps(lie)])
    async def verify(candidate, tiers):
        asked.append(candidate)  # the guard must refuse before anything is checked or run
        return FileReport(path=str(BROKEN))

    outcome = await Fixer(provider, verify, budgets=Budgets(max_rounds=1)).fix(
        FixContext(str(BROKEN), text, findings, "v6e", has_reference=True), (0,))
    assert not outcome.ok and outcome.attempts[0].verdict == "changes the tests"
    assert "redefines the task's reference()" in outcome.attempts[0].detail
    assert asked == []  # never checked, never run


def test_a_jaxbench_candidates_own_workload_is_its_kernel_not_a_test(tmp_path):
    """Beside a baseline.py, optimized.py's workload() holds the pallas_call being improved (the reference
    is the baseline's workload): changing it is the point, changing CONFIG or create_inputs still is not.
    Before, every optimize candidate of a JAXBench task 'redefined the task's workload()'."""
    from pallasite.engine.guards import frozen_names, tampering

    task = tmp_path / "task"
    task.mkdir()
    (task / "baseline.py").write_text("def workload(x):\n    return x\n")
    original = "CONFIG = {'rows': 2048}\n\n\ndef workload(x):\n    return kernel(x, block=256)\n"
    faster = original.replace("256", "512")
    names = frozen_names(str(task / "optimized.py"))
    assert tampering(original, faster, names) == []
    assert tampering(original, faster.replace("2048", "64"), names) == ["redefines the task's CONFIG"]
    # without a baseline beside it (or in baseline.py itself) workload is the reference: frozen
    assert tampering(original, faster, frozen_names(str(tmp_path / "kernel.py"))) == ["redefines the task's workload()"]
    assert tampering(original, faster, frozen_names(str(task / "baseline.py"))) == ["redefines the task's workload()"]

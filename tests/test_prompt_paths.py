"""No machine paths in prompts, for every agent: the fixer, the planner, the implementer, the test writer.

Each is fed what the checker and the worker really say, full of absolute paths (the user's folder,
jax's own files in site-packages), and every prompt sent to the model must name files only.
"""

from __future__ import annotations

import json
from pathlib import Path

from pallasite.agents import test_writer
from pallasite.agents.prompts.fix_prompt import FixContext
from pallasite.agents.fixer import Budgets as FixBudgets
from pallasite.agents.fixer import Fixer
from pallasite.agents.evaluator import BaseEvaluator
from pallasite.agents.optimize import Budgets, PhaseResult, iterate, new_run
from pallasite.agents.prompts.prompt_paths import local
from pallasite.agents.llm.providers import ProviderConfig
from pallasite.agents.llm.providers_scripted import ScriptedProvider
from pallasite.analysis.types import FileReport, Finding, Span

DATA = Path(__file__).parent / "data"
JAX_FILE = "/opt/venv/lib/python3.11/site-packages/jax/_src/pallas/mosaic/lowering.py"


def machine_paths(tmp_path: Path) -> tuple[str, ...]:
    return (str(tmp_path), "/opt/venv", "site-packages")


def compiler_output(tmp_path: Path) -> str:
    kernel = tmp_path / "proj" / "kernel.py"
    return (f'Traceback (most recent call last):\n  File "{kernel}", line 17, in add\n  File "{JAX_FILE}", line 901, '
            f"in _lower\nValueError: The Pallas TPU lowering currently requires that the last two dimensions of "
            f"your block shape are divisible by 8 and 128 ({kernel}:17)")


def assert_clean(prompts: list[str], tmp_path: Path) -> None:
    assert prompts
    for prompt in prompts:
        for path in machine_paths(tmp_path):
            assert path not in prompt, (path, prompt[:3000])


def test_local_shortens_paths_and_leaves_code_and_urls():
    assert local(f'File "{JAX_FILE}", line 3') == 'File "lowering.py", line 3'
    assert local("see ~/proj/k.py:3 and C:\\proj\\k.py") == "see k.py:3 and k.py"
    for kept in ("x = a/b/c", "n // 8", "http://127.0.0.1:8000/v1", "kernel.py:12"):
        assert local(kept) == kept


async def test_fixer_prompts_name_files_only(tmp_path):
    path = str(tmp_path / "proj" / "kernel.py")
    text = (DATA / "agents" / "add_bad_tiling.py").read_text()
    finding = Finding(code="PLS101", message=f"block shape not divisible ({path}:17)", span=Span(16, 0, 16, 10),
                      severity="error", tier=1, detail=compiler_output(tmp_path))
    wrong = json.dumps({"explanation": "x", "edits": [{"search": "BLOCK_COLS = 100", "replace": "BLOCK_COLS = 120"}]})
    provider = ScriptedProvider(ProviderConfig(name="scripted"), [wrong, wrong])

    async def verify(candidate, tiers):  # the edited file still fails, with the compiler's own words
        return FileReport(path=path, findings=(finding,))

    outcome = await Fixer(provider, verify, budgets=FixBudgets(max_rounds=2)).fix(
        FixContext(path, text, (finding,), "v6e"), (0, 1), original_report=FileReport(path=path))
    assert len(outcome.attempts) == 2 and "rejected" in provider.requests[1].prompt
    assert "kernel.py:17" in provider.requests[0].prompt and "lowering.py" in provider.requests[1].prompt
    assert_clean([r.prompt for r in provider.requests], tmp_path)


class FailingCompile(BaseEvaluator):
    """An evaluator whose compile fails with the checker's words (paths and all)."""

    method = "estimate (v6e)"

    def __init__(self, evidence: str) -> None:
        self.evidence = evidence

    async def compile(self, source):
        return PhaseResult(False, "1 error(s): PLS101", evidence=self.evidence)

    async def test(self, source):
        raise AssertionError("not reached")

    async def measure(self, source):
        raise AssertionError("not reached")


async def test_planner_and_implementer_prompts_name_files_only(tmp_path):
    original = (DATA / "optimize" / "add.py").read_text()
    state = new_run(str(tmp_path / "proj" / "add.py"), original)
    state.context["baseline_profile"] = f"profile (cost model): {tmp_path}/proj/add.py: 1.2 us"
    replies = ["Plan A\nbigger blocks", "```python\n" + original + "```"] * 2
    provider = ScriptedProvider(ProviderConfig(name="scripted"), replies)
    evaluator = FailingCompile(f"line 17: PLS101: {compiler_output(tmp_path)}")
    for _ in range(2):  # the second iteration's planner reads the first one's evidence
        await iterate(state, provider, evaluator, Budgets(fix_rounds=0))
    assert [it.verdict for it in state.iterations] == ["not compiled", "not compiled"]
    planner_2 = provider.requests[2].prompt
    assert "lowering.py" in planner_2 and "## Kernel (add.py)" in planner_2
    assert_clean([r.prompt for r in provider.requests], tmp_path)


async def test_test_writer_prompts_name_files_only(tmp_path):
    path = str(tmp_path / "proj" / "axpy.py")
    original = (DATA / "optimize" / "no_tests.py").read_text()
    asked = []
    proposal = "```python\n" + (DATA / "optimize" / "tests" / "axpy_right.py").read_text() + "```"

    async def ask(request):
        asked.append(request.prompt)
        return proposal

    async def validate(text):  # the worker refuses it, in its own words
        return PhaseResult(False, "rejected by the frozen tests", evidence=compiler_output(tmp_path))

    result = await test_writer.propose(ask, path, original, validate, rounds=2)
    assert not result.ok and len(asked) == 2 and "lowering.py" in asked[1] and "axpy.py" in asked[0]
    assert_clean(asked, tmp_path)
